"""The MLflow workspace a step hands on to the pods it starts (trials, nodes, servers)."""

from __future__ import annotations

import pytest

from components.cluster import placement, trainjob
from components.core.workspace import workspace_env
from components.deploying import inference_service
from components.deploying.config import DeployConfig


@pytest.mark.parametrize(
    ("value", "expected"), [("team-a", {"MLFLOW_WORKSPACE": "team-a"}), ("  ", {}), (None, {})]
)
def test_the_workspace_is_handed_on_only_where_one_is_set(value, expected, monkeypatch):
    if value is None:
        monkeypatch.delenv("MLFLOW_WORKSPACE", raising=False)
    else:
        monkeypatch.setenv("MLFLOW_WORKSPACE", value)
    assert workspace_env() == expected


@pytest.mark.parametrize("value", ["../team-b", "team-a\nx", "$(SECRET)", "Team-A", "a" * 64])
def test_a_workspace_that_names_no_namespace_is_refused_before_it_is_handed_on(value, monkeypatch):
    monkeypatch.setenv("MLFLOW_WORKSPACE", value)
    with pytest.raises(ValueError, match="expected MLFLOW_WORKSPACE to name a profile's namespace"):
        workspace_env()
    cfg = DeployConfig(model_version="1", tracking_uri="http://mlflow:5000", image="img")
    with pytest.raises(ValueError, match="MLFLOW_WORKSPACE"):
        inference_service.build(cfg)


def test_a_model_server_and_training_nodes_get_the_steps_workspace(monkeypatch):
    monkeypatch.setenv("MLFLOW_WORKSPACE", "team-a")
    cfg = DeployConfig(model_version="1", tracking_uri="http://mlflow:5000", image="img")
    served = inference_service.manifest(inference_service.build(cfg))
    (container,) = served["spec"]["predictor"]["containers"]
    assert {"name": "MLFLOW_WORKSPACE", "value": "team-a"} in container["env"]
    job = trainjob.ClusterJob(
        name="train-x", namespace="team-a", image="img", nodes=2, gpus_per_node=1,
        tracking_uri="http://mlflow:5000", shared_pvc="shared", runtime="torch-distributed",
        placement=placement.Placement(),
    )  # fmt: skip
    names = {e.name: e.value for e in trainjob._env(job)}
    assert names["MLFLOW_WORKSPACE"] == "team-a"
