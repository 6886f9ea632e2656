"""An InferenceService through the Kubernetes API: read (an API hiccup waited out), written
with a precondition (its ``resourceVersion``: two writers at once cannot both land), and
waited on until KServe says it serves.

What "serves" means depends on KServe's deployment mode:

- Standard: KServe's ``Ready`` for the new generation, and the predictor's Deployment
  rolled out (every replica updated and available, none of the old left), as ``kubectl
  rollout status`` reads it. A canary (KServe 0.20+) is ``spec.canary``, a predictor of
  its own with its own Deployment, ready when KServe's ``CanaryPredictorReady`` and its
  canary status say so and its Deployment has rolled out.
- Knative: ``Ready`` for the new generation, and the predictor's latest created revision
  is its latest ready one; a canary is that revision at ``canaryTrafficPercent``.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from kserve import constants
from kubernetes import client as k8s

from components.cluster.kube import ApiError, Deadline
from components.deploying import status
from components.deploying.config import KNATIVE
from components.deploying.inference_service import CANARY_URI_ANNOTATION

log = logging.getLogger(__name__)
GROUP, VERSION = constants.KSERVE_GROUP, constants.KSERVE_V1BETA1_VERSION
PLURAL = constants.KSERVE_PLURAL_INFERENCESERVICE


class Service(NamedTuple):
    """Which InferenceService, in which of KServe's modes."""

    namespace: str
    name: str
    mode: str

    def __str__(self) -> str:
        return f"InferenceService {self.namespace}/{self.name}"


def write(
    objects: k8s.CustomObjectsApi,
    service: Service,
    body: dict[str, Any],
    deadline: Deadline,
    current: dict[str, Any] | None,
) -> int:
    """Create the service (``current`` None), or merge-patch ``current`` on the condition
    that it is still the version read (its ``resourceVersion``: a promote and a rollback
    at once cannot both land); with the API's strict field validation, so that a KServe
    older than a field refuses it instead of dropping it. The new generation.

    Raises:
        RuntimeError: the service changed since it was read, or the API did not answer
            and the read-back shows the change did not land; either way, what it is now.
    """
    if current is None:
        written = _sent(
            service, "create",
            lambda: deadline.call(
                f"create {service}", objects.create_namespaced_custom_object,
                GROUP, VERSION, service.namespace, PLURAL, body, field_validation="Strict",
            ),
        )  # fmt: skip
        return status.generation(written)
    version = str(_meta(current).get("resourceVersion") or "")
    conditional = {**body, "metadata": {**body.get("metadata", {}), "resourceVersion": version}}
    try:
        written = _sent(
            service, "update",
            lambda: deadline.call(
                f"update {service}", objects.patch_namespaced_custom_object,
                GROUP, VERSION, service.namespace, PLURAL, service.name, conditional,
                field_validation="Strict",
            ),
        )  # fmt: skip
    except ApiError as err:
        now = read(objects, service, deadline, 0.5) or {}
        if err.status == 409:
            raise RuntimeError(
                f"{service} changed while this step ran (another deploy, promote or rollback?): "
                f"nothing written by this step; it now {_state(now)}. Run it again if still "
                "wanted"
            ) from None
        if err.status == 0 and _landed(now, version, body):
            log.warning("%s: no answer to the update, but reading it back, it landed", service)
            return status.generation(now)
        if err.status == 0:
            raise RuntimeError(
                f"{err}; read back, {service} is unchanged: it {_state(now)}"
            ) from None
        raise
    return status.generation(written)


def _sent(service: Service, verb: str, send: Any) -> dict[str, Any]:
    """``send()``, with an older KServe's refusal of ``spec.canary`` said plainly."""
    try:
        written: dict[str, Any] = send()
        return written
    except ApiError as err:
        if 'unknown field "spec.canary"' in str(err):
            raise RuntimeError(
                f"this cluster's KServe does not know spec.canary, the Standard mode's "
                f"canary (KServe 0.20 and later): upgrade KServe, or deploy with "
                f"canary_percent 100 (a rolling update) or in the Knative mode ({err})"
            ) from None
        raise


def _meta(found: dict[str, Any]) -> dict[str, Any]:
    meta = found.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _landed(now: dict[str, Any], version: str, body: dict[str, Any]) -> bool:
    """Whether the service read back holds ``body``'s annotations on a newer version than
    ``version``: the unanswered update was applied."""
    wanted = body.get("metadata", {}).get("annotations", {})
    held = status.annotations_of(now) if now else {}
    newer = bool(now) and str(_meta(now).get("resourceVersion")) != version
    return newer and all(held.get(key) == value for key, value in wanted.items())


def _state(found: dict[str, Any]) -> str:
    """What a service serves, read back, in words."""
    if not found:
        return "does not exist"
    serving = status.model_uri(found) or "an unnamed version"
    candidate = status.annotations_of(found).get(CANARY_URI_ANNOTATION)
    return f"serves {serving}" + (f" with {candidate} as its canary" if candidate else "")


def read(
    objects: k8s.CustomObjectsApi,
    service: Service,
    deadline: Deadline,
    poll_seconds: float,
    patient: bool = True,
) -> dict[str, Any] | None:
    """The service, or None. ``patient``: an API server that answers 5xx or not at all is
    waited out within the deadline, which then ends in the last refusal seen; else (the
    first request, before anything was written) any failure is final at once."""
    refused: ApiError | None = None
    while True:
        try:
            found: dict[str, Any] = deadline.call(
                f"read InferenceService {service.namespace}/{service.name}",
                objects.get_namespaced_custom_object,
                GROUP,
                VERSION,
                service.namespace,
                PLURAL,
                service.name,
            )
            return found
        except TimeoutError:
            if refused is not None:
                raise refused from None
            raise
        except ApiError as err:
            if err.status == 404 and err.reason == "NotFound":
                return None
            if not patient or 0 < err.status < 500:
                raise
            refused = err
            log.warning("%s; trying again", err)
            deadline.sleep(poll_seconds)


def wait_until_serving(
    api_client: k8s.ApiClient,
    objects: k8s.CustomObjectsApi,
    serving: tuple[Service, str],
    generation: int,
    deadline: Deadline,
    poll_seconds: float,
    canary: str | None = None,
) -> str:
    """Wait for KServe's word that the service serves its new generation with the model
    (and, with ``canary``, that the Standard-mode canary of that name is ready); its URL.
    ``serving``: the service, and what it serves in words."""
    service, model_uri = serving
    pending = "no status reported yet"
    while deadline.left() > 0:
        try:
            found = read(objects, service, deadline, poll_seconds) or {}
        except TimeoutError:
            break  # the deadline ran out during a read: what was last seen is the answer
        if status.observed(found) >= generation:
            if reason := status.failure(found):
                raise RuntimeError(f"KServe could not serve {model_uri} as {service}: {reason}")
            pending = status.not_serving(found, service.mode)
            if not pending and canary:
                pending = status.canary_pending(found, canary)
            if not pending and service.mode != KNATIVE:
                names = [status.predictor(found).get("name")] + ([canary] if canary else [])
                for name in names:
                    pending = pending or _rollout_pending(api_client, service, name, deadline)
            if not pending:
                url = status.url(found)
                log.info("%s serves %s at %s", service, model_uri, url)
                return url
        deadline.sleep(poll_seconds)
    raise TimeoutError(f"{service} was not serving within {deadline.seconds:g} s: {pending}")


def _rollout_pending(
    api_client: k8s.ApiClient, service: Service, predictor: str | None, deadline: Deadline
) -> str:
    """What a predictor's Deployment still waits for, or "" once rolled out."""
    name = deployment_name(service.name, predictor)
    try:
        found = deadline.call(
            f"read Deployment {service.namespace}/{name}",
            k8s.AppsV1Api(api_client).read_namespaced_deployment,
            name,
            service.namespace,
        )
    except ApiError as err:
        if err.status == 404 and err.reason == "NotFound":
            return f"Deployment {name} not created yet"
        raise
    return status.rollout_pending(api_client.sanitize_for_serialization(found))


def deployment_name(service: str, predictor: str | None) -> str:
    """KServe's name for a predictor's Deployment: ``NAME-predictor``, or for a named
    predictor (a canary, or one promoted from it) ``NAME-PREDICTOR-predictor``."""
    return f"{service}-{predictor}-predictor" if predictor else f"{service}-predictor"
