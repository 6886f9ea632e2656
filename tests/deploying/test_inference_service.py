"""The InferenceService as built: valid for KServe's CRD in both modes, locked down at the
container (Knative refuses a pod-level securityContext), credentials by reference only."""

from __future__ import annotations

import dataclasses

import pytest

from components.deploying import inference_service
from components.deploying.config import DeployConfig
from tests.support import crds

CFG = DeployConfig(model_version="4", tracking_uri="http://mlflow:5000", image="img")
KNATIVE = dataclasses.replace(CFG, deployment_mode="Knative", canary_percent=10)


@pytest.mark.parametrize(("cfg", "canary"), [(CFG, False), (KNATIVE, False), (KNATIVE, True)])
def test_it_validates_strictly_against_kserves_crd_in_each_mode(cfg, canary):
    built = inference_service.manifest(inference_service.build(cfg, knative_canary=canary))
    assert crds.errors(built) == []
    assert built["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == (
        cfg.deployment_mode
    )
    assert built["spec"]["predictor"].get("canaryTrafficPercent") == (10 if canary else None)


@pytest.mark.parametrize("percent", [0, 10])
def test_a_standard_mode_canary_validates_strictly_against_kserve_0_20s_crd(percent):
    """KServe 0.20's ``spec.canary``: a named predictor of its own beside the serving one,
    and its share of the traffic (0: a dark launch)."""
    built = inference_service.manifest(
        inference_service.build(dataclasses.replace(CFG, model_version="3"))
    )
    canary = inference_service.canary(dataclasses.replace(CFG, canary_percent=percent))
    built["spec"]["canary"] = [inference_service.manifest(canary)]
    assert crds.errors(built) == []
    (entry,) = built["spec"]["canary"]
    assert entry["trafficPercent"] == percent and entry["predictor"]["name"] == "v4"
    assert "maxReplicas" not in entry["predictor"]  # KServe refuses autoscaling on a canary
    assert entry["predictor"]["minReplicas"] <= built["spec"]["predictor"]["minReplicas"]
    (container,) = entry["predictor"]["containers"]
    assert {"name": "STORAGE_URI", "value": "models:/dogs-vs-cats/4"} in container["env"]


def test_a_misplaced_field_is_caught_by_the_strict_schema():
    built = inference_service.manifest(inference_service.build(CFG))
    built["spec"]["predictor"]["replicas"] = 2
    assert crds.errors(built) == [
        "spec.predictor: Additional properties are not allowed ('replicas' was unexpected)"
    ]


def test_the_model_server_runs_the_version_non_root_with_probes_and_limits():
    predictor = inference_service.manifest(inference_service.build(CFG))["spec"]["predictor"]
    (container,) = predictor["containers"]
    assert container["command"] == ["python", "-m", "components.serve"]
    # the model named where KServe looks for a custom container's (its storage initializer
    # fetches it and points the variable at the files), the server told to load that
    assert container["args"] == ["--model=$(STORAGE_URI)", "--host=0.0.0.0", "--port=8080"]
    assert {"name": "STORAGE_URI", "value": "models:/dogs-vs-cats/4"} in container["env"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models/dogs-vs-cats"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v1/models/dogs-vs-cats"
    assert "securityContext" not in predictor  # Knative's default refuses it
    hardening = container["securityContext"]
    assert hardening["runAsNonRoot"] is True and hardening["runAsUser"] == 10001
    assert hardening["seccompProfile"] == {"type": "RuntimeDefault"}
    assert hardening["readOnlyRootFilesystem"] is True
    assert hardening["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]) == {"requests", "limits"}
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (1, 3)


def test_credentials_are_read_from_the_secrets_by_reference_never_written_in():
    (container,) = inference_service.manifest(inference_service.build(CFG))["spec"]["predictor"][
        "containers"
    ]
    literal = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    assert literal == {
        "MLFLOW_TRACKING_URI": "http://mlflow:5000",
        "STORAGE_URI": "models:/dogs-vs-cats/4",
    }
    referenced = {
        e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e
    }
    assert referenced["MLFLOW_TRACKING_PASSWORD"] == {
        "name": "dogs-vs-cats-mlflow",
        "key": "MLFLOW_TRACKING_PASSWORD",
        "optional": True,
    }
    assert referenced["AWS_SECRET_ACCESS_KEY"]["name"] == "dogs-vs-cats-s3"
    assert "envFrom" not in container


def test_it_carries_the_label_that_lets_the_step_update_it_later():
    metadata = inference_service.manifest(inference_service.build(CFG))["metadata"]
    assert metadata["labels"]["app.kubernetes.io/managed-by"] == "dogs-vs-cats-deploy"
