"""The Kubernetes API helpers the launcher and deploy share, against the API stand-in."""

from __future__ import annotations

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from components.cluster import kube
from tests.support.kube_api import FakeKServeApi, write_kubeconfig

ISVC = ("serving.kserve.io", "v1beta1", "team-a", "inferenceservices", "dogs-vs-cats")


def test_the_namespace_is_the_pods_own_else_the_default(tmp_path, monkeypatch):
    monkeypatch.setattr(kube, "SERVICE_ACCOUNT_NAMESPACE", tmp_path / "namespace")
    assert kube.current_namespace() == "kubeflow"
    (tmp_path / "namespace").write_text("team-a\n")
    assert kube.current_namespace() == "team-a"


def test_outside_a_pod_the_kubeconfig_context_is_used(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with FakeKServeApi() as api:
        monkeypatch.setenv("KUBECONFIG", str(write_kubeconfig(tmp_path / "kubeconfig", api.url)))
        objects = k8s.CustomObjectsApi(kube.api_client())
        assert kube.get_or_none(objects, *ISVC) is None  # 404: there is none


def test_an_error_other_than_not_found_is_raised():
    with FakeKServeApi() as api:
        configuration = k8s.Configuration()
        configuration.host = api.url
        objects = k8s.CustomObjectsApi(k8s.ApiClient(configuration))
        api.unavailable_reads = 1
        with pytest.raises(ApiException) as raised:
            kube.get_or_none(objects, *ISVC)
    assert raised.value.status == 503
