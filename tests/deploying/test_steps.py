"""After a rollout: the serving URL recorded on the training run, and only after one."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from mlflow.tracking import MlflowClient

from components.deploying.config import DeployConfig
from components.deploying.steps import serve_and_record
from components.tracking import run_log
from tests.support.kube_api import FakeKServeApi

CFG = DeployConfig(
    model_version="5", tracking_uri="http://mlflow:5000", image="img", poll_seconds=0.01
)


def client(api) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    configuration.host = api.url
    return k8s.ApiClient(configuration)


def test_the_url_is_tagged_on_the_run_once_ready(mlflow_store):
    run_id = run_log.create_run("dogs-vs-cats", run_name="trained", tags={})
    with FakeKServeApi() as api:
        url = serve_and_record(CFG, run_id, client(api))
    tags = MlflowClient(mlflow_store).get_run(run_id).data.tags
    assert tags["serving.url"] == url == "http://dogs-vs-cats.kubeflow.example.com"


def test_a_failed_rollout_records_nothing(mlflow_store):
    run_id = run_log.create_run("dogs-vs-cats", run_name="trained", tags={})
    with FakeKServeApi(outcome="FailedToLoad") as api, pytest.raises(RuntimeError):
        serve_and_record(CFG, run_id, client(api))
    assert "serving.url" not in MlflowClient(mlflow_store).get_run(run_id).data.tags
