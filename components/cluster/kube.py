"""The Kubernetes API as the steps that call it (the TrainJob launcher, deploy) see it."""

from __future__ import annotations

import os
from pathlib import Path

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def current_namespace(default: str = "kubeflow") -> str:
    """The namespace this pod runs in, where what a step creates goes too."""
    if SERVICE_ACCOUNT_NAMESPACE.is_file():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return default


def in_cluster_client() -> k8s.ApiClient:
    """The Kubernetes API as this pod's service account sees it."""
    from kubernetes import config

    config.load_incluster_config()
    return k8s.ApiClient()


def api_client() -> k8s.ApiClient:
    """In a pod, its service account's API; elsewhere the kubeconfig's current context."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster_client()
    from kubernetes import config

    config.load_kube_config(config_file=os.environ.get("KUBECONFIG"))  # as set now
    return k8s.ApiClient()


def get_or_none(
    objects: k8s.CustomObjectsApi, group: str, version: str, namespace: str, plural: str, name: str
) -> dict | None:
    """A namespaced custom resource, or None when there is none by that name."""
    try:
        return objects.get_namespaced_custom_object(group, version, namespace, plural, name)
    except ApiException as err:
        if err.status == 404:
            return None
        raise
