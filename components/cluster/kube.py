"""The Kubernetes API as the steps that call it (the TrainJob launcher, deploy) see it.

Every request made through ``Deadline.call`` is bounded by a timeout and by the step's
deadline, and ends, when it fails, in one ``ApiError`` line: what was asked, what the API
answered (escaped: text from a server cannot forge lines or move the terminal), what to try.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from components.core.errors import printable

SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
REQUEST_SECONDS = 30.0  # one request's read timeout, at most
CONNECT_SECONDS = 10.0
REQUEST_TIMEOUT = (CONNECT_SECONDS, REQUEST_SECONDS)  # for a call outside a Deadline
# what a refusal most likely means, by HTTP status
HINTS = {
    401: "the credentials were refused: is the kubeconfig's token current?",
    403: "this identity may not do that here: see the step's Role in manifests/pipeline",
    404: "no such resource or namespace: is its CRD installed, and the namespace right?",
}


class ApiError(RuntimeError):
    """A request the Kubernetes API refused (``status``, and its Status ``reason`` such as
    ``NotFound``) or never answered (``status`` 0)."""

    def __init__(self, message: str, status: int = 0, reason: str = ""):
        super().__init__(message)
        self.status, self.reason = status, reason


def current_namespace(default: str = "kubeflow") -> str:
    """The namespace this pod runs in, where what a step creates goes too."""
    if SERVICE_ACCOUNT_NAMESPACE.is_file():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return default


def in_cluster_client() -> k8s.ApiClient:
    """The Kubernetes API as this pod's service account sees it."""
    from kubernetes import config

    try:
        config.load_incluster_config()
    except config.ConfigException as err:
        raise ApiError(f"cannot use this pod's service account: {printable(str(err))}") from None
    return _client(k8s.Configuration.get_default_copy())


def api_client() -> k8s.ApiClient:
    """In a pod, its service account's API; elsewhere the kubeconfig's current context."""
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster_client()
    from kubernetes import config

    where = os.environ.get("KUBECONFIG") or "~/.kube/config"
    configuration = k8s.Configuration()
    try:
        config.load_kube_config(
            config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration
        )
    except config.ConfigException as err:
        raise ApiError(
            f"no usable Kubernetes context in {where} ({printable(str(err))}): set KUBECONFIG "
            "or `kubectl config use-context`, or run the step in the cluster"
        ) from None
    return _client(configuration)


def _client(configuration: k8s.Configuration) -> k8s.ApiClient:
    configuration.retries = 0  # a failed request is retried, if at all, within the deadline
    return k8s.ApiClient(configuration)


@dataclass
class Deadline:
    """The step's time: each request is bounded by what is left of it."""

    seconds: float
    ends: float = field(init=False)

    def __post_init__(self) -> None:
        self.ends = time.monotonic() + self.seconds

    def left(self) -> float:
        return self.ends - time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, min(seconds, self.left())))

    def call(self, what: str, request: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``request(*args, **kwargs)`` with a timeout inside the deadline; its failure one
        line.

        Raises:
            TimeoutError: the deadline passed before or during the request.
            ApiError: the API refused it (``status``) or could not be reached.
        """
        left = self.left()
        if left <= 0:
            raise TimeoutError(f"no time left within {self.seconds:g} s to {what}")
        timeout = (min(CONNECT_SECONDS, left), min(REQUEST_SECONDS, left))
        try:
            return request(*args, **kwargs, _request_timeout=timeout)
        except ApiException as err:
            said = _status_of(err)
            reason = str(said.get("reason", ""))
            raise ApiError(_refusal(what, err, said), err.status, reason) from None
        except HTTPError as err:
            if self.left() <= 0:
                raise TimeoutError(f"no answer within {self.seconds:g} s to {what}") from None
            cause = getattr(err, "reason", None) or err
            raise ApiError(
                f"cannot {what}: the Kubernetes API did not answer ({printable(str(cause))})"
            ) from None


def _status_of(err: ApiException) -> dict[str, Any]:
    """The ``Status`` object the API answered with, or {} for anything else."""
    try:
        said = json.loads(err.body or "")
    except (ValueError, TypeError):
        return {}
    return said if isinstance(said, dict) else {}


def _refusal(what: str, err: ApiException, status: dict[str, Any]) -> str:
    said = status.get("message") or err.body or ""
    text = printable(" ".join(str(said).split()))[:300]
    hint = HINTS.get(err.status or 0, "")
    line = f"cannot {what}: the Kubernetes API answered {err.status} {printable(str(err.reason))}"
    return line + (f": {text}" if text else "") + (f"; {hint}" if hint else "")


def get_or_none(
    objects: k8s.CustomObjectsApi, group: str, version: str, namespace: str, plural: str, name: str
) -> dict[str, Any] | None:
    """A namespaced custom resource, or None when there is none by that name."""
    try:
        found: dict[str, Any] = objects.get_namespaced_custom_object(
            group, version, namespace, plural, name, _request_timeout=REQUEST_TIMEOUT
        )
        return found
    except ApiException as err:
        if err.status == 404:
            return None
        raise
