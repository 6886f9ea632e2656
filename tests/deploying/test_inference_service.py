"""The InferenceService as built: valid for KServe's CRD, locked down, canary on request."""

from __future__ import annotations

from components.deploying import inference_service
from components.deploying.config import DeployConfig
from tests import crds

CFG = DeployConfig(model_version="4", tracking_uri="http://mlflow:5000", image="img")


def test_it_validates_strictly_against_kserves_crd_with_and_without_a_canary():
    for canary in (False, True):
        built = inference_service.manifest(inference_service.build(CFG, canary=canary))
        assert crds.errors(built) == []
        assert built["spec"]["predictor"].get("canaryTrafficPercent") == (10 if canary else None)


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
    assert container["args"] == ["--model=models:/dogs-vs-cats/4", "--port=8080"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v1/models/dogs-vs-cats"
    assert predictor["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert set(container["resources"]) == {"requests", "limits"}
    assert (predictor["minReplicas"], predictor["maxReplicas"]) == (1, 3)
