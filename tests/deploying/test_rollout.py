"""The deploy step's life cycle against a stand-in for KServe's API (no cluster runs here):
create and wait Ready, update as a canary, a controller failure, a timeout, a refusal."""

from __future__ import annotations

import dataclasses

import pytest
from kubernetes import client as k8s

from components.deploying import inference_service, rollout
from components.deploying.config import DeployConfig
from tests import crds
from tests.kube_api import FakeKServeApi

CFG = DeployConfig(
    model_version="2",
    tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000",
    image="registry.example/dogs-vs-cats@sha256:" + "a" * 64,
    namespace="team-a",
    poll_seconds=0.01,
    timeout_seconds=5,
)
KEY = ("team-a", "dogs-vs-cats")


def client(api) -> k8s.ApiClient:
    configuration = k8s.Configuration()
    configuration.host = api.url
    return k8s.ApiClient(configuration)


def served_version(service: dict) -> str:
    return service["spec"]["predictor"]["containers"][0]["args"][0]


def test_a_first_deploy_creates_the_service_and_returns_its_url_once_ready():
    with FakeKServeApi() as api:
        url = rollout.deploy(CFG, client(api))
        ((kind, body),) = api.writes
        stored = api.services[KEY]
    assert url == "http://dogs-vs-cats.team-a.example.com"
    assert kind == "create" and served_version(body) == "--model=models:/dogs-vs-cats/2"
    assert "canaryTrafficPercent" not in body["spec"]["predictor"]
    assert crds.errors({k: v for k, v in stored.items() if k != "status"}) == []


def test_a_new_version_over_a_serving_one_comes_in_as_a_canary():
    with FakeKServeApi() as api:
        earlier = dataclasses.replace(CFG, model_version="1")
        api.serving("team-a", inference_service.manifest(inference_service.build(earlier)))
        url = rollout.deploy(CFG, client(api))
        ((kind, body),) = api.writes
        stored = {k: v for k, v in api.services[KEY].items() if k != "status"}
    assert kind == "patch" and url.startswith("http://dogs-vs-cats.team-a")
    assert body["spec"]["predictor"]["canaryTrafficPercent"] == 10
    assert served_version(stored) == "--model=models:/dogs-vs-cats/2"
    assert stored["metadata"]["generation"] == 2 and crds.errors(stored) == []


def test_the_same_version_again_is_an_update_in_place_with_all_the_traffic():
    with FakeKServeApi() as api:
        api.serving("team-a", inference_service.manifest(inference_service.build(CFG)))
        rollout.deploy(CFG, client(api))
        ((kind, body),) = api.writes
    assert kind == "patch" and body["spec"]["predictor"]["canaryTrafficPercent"] == 100


def test_a_model_that_does_not_load_fails_with_kserves_reason():
    with FakeKServeApi(outcome="FailedToLoad") as api:
        with pytest.raises(RuntimeError) as failed:
            rollout.deploy(CFG, client(api))
    assert str(failed.value) == (
        "KServe could not serve models:/dogs-vs-cats/2 as InferenceService team-a/dogs-vs-cats: "
        "BlockedByFailedLoad: ModelLoadFailed: no registered model version 7"
    )


def test_a_service_never_ready_times_out_naming_its_conditions():
    with FakeKServeApi(outcome=None) as api:
        with pytest.raises(TimeoutError) as late:
            rollout.deploy(dataclasses.replace(CFG, timeout_seconds=0.3), client(api))
    assert "was not Ready within 0.3 s: Ready RevisionMissing: Configuration is waiting" in str(
        late.value
    )


def test_a_refused_resource_is_one_error_naming_it_and_an_api_hiccup_is_waited_out():
    with FakeKServeApi() as api:
        api.refuse_writes = True
        with pytest.raises(RuntimeError, match="refused InferenceService team-a/dogs-vs-cats: 422"):
            rollout.deploy(CFG, client(api))
        api.refuse_writes, api.unavailable_reads = False, 0
        rollout.deploy(CFG, client(api))  # created
        api.unavailable_reads = 2
        assert rollout.deploy(CFG, client(api)).startswith("http://")  # 503s survived
