"""The deploy step's settings: everything Kubernetes or KServe would refuse stops here,
before any request is made."""

from __future__ import annotations

import pytest

from components.deploying.config import DeployConfig

BASE = dict(model_version="3", tracking_uri="http://mlflow:5000", image="img")


def test_the_model_is_named_by_its_version_not_an_alias():
    assert DeployConfig(**BASE).model_uri == "models:/dogs-vs-cats/3"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_version": "candidate"}, "expected a registered model version"),
        ({"model_version": "١"}, "expected a registered model version"),  # an Arabic-Indic 1
        ({"model_version": "03"}, "expected a registered model version"),
        ({"name": "Dogs_Cats"}, "expected the name as a DNS label"),
        ({"name": "dogs/../cats"}, "expected the name as a DNS label"),
        ({"name": "d" * 54}, "DNS label of at most 53 characters"),
        ({"namespace": "-x"}, "expected a DNS label as the namespace"),
        ({"image": "registry.example/dogs\nx:1"}, "expected an image reference"),
        ({"image": "registry.example/dogs:1 --privileged"}, "expected an image reference"),
        ({"image": ""}, "expected an image reference"),
        ({"tracking_uri": "http://mlflow:5000\nX-Forged: 1"}, "expected the tracking URI"),
        ({"tracking_uri": "http://mlflow :5000"}, "expected the tracking URI"),
        ({"canary_percent": -1}, "expected canary_percent from 0 to 100"),
        ({"canary_percent": 101}, "expected canary_percent from 0 to 100"),
        ({"min_replicas": 4}, "expected 0 <= min_replicas <= max_replicas"),
        ({"deployment_mode": "Serverless"}, "expected deployment_mode Standard or Knative"),
        ({"mlflow_secret": "Team Secret"}, "expected the mlflow_secret as a Kubernetes name"),
        ({"timeout_seconds": float("nan")}, "expected timeout_seconds above 0"),
        ({"timeout_seconds": float("inf")}, "expected timeout_seconds above 0"),
        ({"poll_seconds": -1.0}, "expected poll_seconds above 0"),
        ({"poll_seconds": 0.0}, "expected poll_seconds above 0"),
    ],
)
def test_values_a_cluster_would_refuse_are_refused_first(changes, message):
    with pytest.raises(ValueError, match=message):
        DeployConfig(**{**BASE, **changes})


def test_a_password_in_the_tracking_uri_stays_out_of_what_the_model_server_is_given():
    cfg = DeployConfig(**{**BASE, "tracking_uri": "http://bob:p@ss-w0rd@mlflow:5000"})
    assert cfg.served_tracking_uri == "http://mlflow:5000"


@pytest.mark.parametrize("uri", ["sqlite:///mlflow.db", "file:///runs", "mlflow:5000"])
def test_a_tracking_uri_no_pod_could_reach_is_refused_when_served(uri):
    cfg = DeployConfig(**{**BASE, "tracking_uri": uri})  # a local run checks it so, unused
    with pytest.raises(ValueError, match=r"expected the tracking URI as http\(s\)://HOST"):
        _ = cfg.served_tracking_uri


def test_scale_to_zero_is_refused_in_the_standard_mode():
    with pytest.raises(ValueError, match="min_replicas 0 .* needs deployment_mode Knative"):
        DeployConfig(**{**BASE, "min_replicas": 0})
    assert DeployConfig(**{**BASE, "min_replicas": 0, "deployment_mode": "Knative"})


@pytest.mark.parametrize("mode", ["Standard", "Knative"])
@pytest.mark.parametrize("percent", [0, 10, 99])
def test_a_canary_and_a_dark_launch_are_taken_in_either_mode(mode, percent):
    cfg = DeployConfig(**{**BASE, "canary_percent": percent, "deployment_mode": mode})
    assert cfg.canary


def test_a_digest_pinned_image_and_a_registry_with_a_port_are_references():
    for image in (
        "registry.example:5000/team/dogs-vs-cats:0.1.0",
        "ghcr.io/dogs-vs-cats/dogs-vs-cats@sha256:" + "a" * 64,
    ):
        assert DeployConfig(**{**BASE, "image": image}).image == image
