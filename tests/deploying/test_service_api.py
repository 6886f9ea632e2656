"""An InferenceService through the Kubernetes API, against the stand-in for KServe's API
(``tests.support.kube_api.FakeKServeApi``: no Kubernetes API server runs here): read with
hiccups waited out, written only over the version read, Deployments named as KServe
names them. The whole life cycle through these: tests/deploying/test_release.py."""

from __future__ import annotations

import dataclasses

import pytest
from kubernetes import client as k8s

from components.cluster import kube
from components.deploying import inference_service, service_api
from components.deploying.service_api import Service
from tests.deploying.test_release import CFG, client
from tests.support.kube_api import FakeKServeApi

KEY = ("team-a", "dogs-vs-cats")
SERVICE = Service("team-a", "dogs-vs-cats", "Standard")


def objects(url: str) -> k8s.CustomObjectsApi:
    return k8s.CustomObjectsApi(client(url))


def test_kserves_deployment_names():
    assert service_api.deployment_name("dogs-vs-cats", None) == "dogs-vs-cats-predictor"
    assert service_api.deployment_name("dogs-vs-cats", "v7") == "dogs-vs-cats-v7-predictor"


def test_an_absent_service_reads_as_none_and_503s_are_waited_out_when_patient():
    with FakeKServeApi() as api:
        api_objects = objects(api.url)
        assert service_api.read(api_objects, SERVICE, kube.Deadline(60), 0.01) is None
        api.serving("team-a", inference_service.manifest(inference_service.build(CFG)))
        api.unavailable_reads = 2
        found = service_api.read(api_objects, SERVICE, kube.Deadline(60), 0.01)
        assert found is not None and found["metadata"]["name"] == "dogs-vs-cats"
        api.unavailable_reads = 1
        with pytest.raises(kube.ApiError, match="503"):
            service_api.read(api_objects, SERVICE, kube.Deadline(60), 0.01, patient=False)


def test_a_write_over_a_version_no_longer_held_is_refused_and_says_what_serves():
    with FakeKServeApi() as api:
        api.serving("team-a", inference_service.manifest(inference_service.build(CFG)))
        api_objects = objects(api.url)
        read = service_api.read(api_objects, SERVICE, kube.Deadline(60), 0.01)
        assert read is not None
        newer = inference_service.build(dataclasses.replace(CFG, model_version="3"))
        service_api.write(
            api_objects, SERVICE, inference_service.manifest(newer), kube.Deadline(60), read
        )
        stale = inference_service.build(dataclasses.replace(CFG, model_version="4"))
        with pytest.raises(RuntimeError, match="changed while this step ran") as refused:
            service_api.write(
                api_objects, SERVICE, inference_service.manifest(stale), kube.Deadline(60), read
            )
    assert "it now serves models:/dogs-vs-cats/3" in str(refused.value)
