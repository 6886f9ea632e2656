"""Create or update the InferenceService, then wait until KServe says it serves the version.

A new version over a serving one comes in whole, or as a canary (``canary_percent`` of the
traffic, 0 a dark launch) until ``promote`` gives it all the traffic or ``rollback``
removes it. What "serves" means depends on KServe's deployment mode:

- Standard: KServe's ``Ready`` for the new generation, and the predictor's Deployment
  rolled out (every replica updated and available, none of the old left), as ``kubectl
  rollout status`` reads it. A canary (KServe 0.20+) is ``spec.canary``, a predictor of
  its own with its own Deployment, ready when KServe's ``CanaryPredictorReady`` and its
  canary status say so and its Deployment has rolled out.
- Knative: ``Ready`` for the new generation, and the predictor's latest created revision
  is its latest ready one; a canary is that revision at ``canaryTrafficPercent``.

The step only updates a service that it created (its ``managed-by`` label); a load that
fails, a spec the controller refuses, or no answer within the deadline fails the step in
one line with KServe's own reason.
"""

from __future__ import annotations

import logging
from typing import Any, NamedTuple

from kserve import constants
from kubernetes import client as k8s

from components.cluster.kube import ApiError, Deadline
from components.deploying import status
from components.deploying.config import (
    KNATIVE,
    PROMOTE,
    ROLLBACK,
    STANDARD,
    DeployConfig,
    RolloutConfig,
)
from components.deploying.inference_service import (
    CANARY_URI_ANNOTATION,
    MANAGED_BY,
    MODE_ANNOTATION,
    MODEL_URI_ANNOTATION,
    STORAGE_URI,
    build,
    canary,
    canary_name,
    manifest,
)

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


def deploy(cfg: DeployConfig, api_client: k8s.ApiClient) -> str:
    """Serve ``cfg``'s version; its URL once it serves, within ``cfg.timeout_seconds``.

    Raises:
        ApiError: the cluster refused a request or did not answer it.
        RuntimeError: the name is another's, or KServe reports a failure.
        TimeoutError: not serving within the deadline, with the last conditions.
    """
    # a tracking URI no pod could use is refused here, before any request
    log.info("the model server will load %s through %s", cfg.model_uri, cfg.served_tracking_uri)
    if cfg.served_tracking_uri != cfg.tracking_uri:
        log.info(
            "the tracking URI's user and password stay out of the InferenceService: "
            "its model server reads them from the secret %s",
            cfg.mlflow_secret,
        )
    deadline = Deadline(cfg.timeout_seconds)
    objects = k8s.CustomObjectsApi(api_client)
    service = Service(cfg.namespace, cfg.name, cfg.deployment_mode)
    current = _read(objects, service, deadline, cfg.poll_seconds, patient=False)
    if current is not None:
        _refuse_foreign(current, cfg)
    # a version already serving keeps most traffic while the new one proves itself
    as_canary = cfg.canary and current is not None and status.model_uri(current) != cfg.model_uri
    if as_canary and current is not None and not status.is_ready(current):
        raise RuntimeError(
            f"{service} is not Ready ({status.not_serving(current, service.mode)}), so "
            f"{cfg.model_uri} cannot run beside it as a canary at {cfg.canary_percent}%; "
            "nothing written: make it serve again (or `rollout rollback` a canary of it), "
            "or replace it whole with canary_percent 100"
        )
    if current is None:
        log.info("creating %s for %s (%s mode)", service, cfg.model_uri, cfg.deployment_mode)
        body = manifest(build(cfg))
    elif as_canary:
        log.info("adding %s to %s as a canary at %d%%", cfg.model_uri, service, cfg.canary_percent)
        body = _canary_patch(cfg, current)
    else:
        log.info("updating %s to %s with all the traffic", service, cfg.model_uri)
        body = manifest(build(cfg))
        body["metadata"]["annotations"][CANARY_URI_ANNOTATION] = None  # one that ran is gone
        if cfg.deployment_mode == KNATIVE:
            body["spec"]["predictor"]["canaryTrafficPercent"] = 100  # no revision to keep
        else:
            body["spec"]["canary"] = None
    generation = _write(objects, service, body, deadline, current)
    standard = as_canary and service.mode == STANDARD
    standard_canary = canary_name(cfg.model_version) if standard else None
    serves = cfg.model_uri
    if as_canary and current is not None:
        share = (
            "none of the traffic: a dark launch"
            if cfg.canary_percent == 0
            else (f"{cfg.canary_percent}% of the traffic")
        )
        serves = f"{status.model_uri(current)}, with {cfg.model_uri} as its canary ({share}),"
    return _wait_until_serving(
        api_client, objects, (service, serves), generation, deadline, cfg.poll_seconds,
        standard_canary,
    )  # fmt: skip


def _canary_patch(cfg: DeployConfig, current: dict[str, Any]) -> dict[str, Any]:
    """What turns the serving service into one with ``cfg``'s version as its canary: in the
    Standard mode a ``spec.canary`` beside the predictor, in Knative a new revision at
    ``canaryTrafficPercent``. The serving version stays the one annotated as serving."""
    annotations = {CANARY_URI_ANNOTATION: cfg.model_uri}
    if cfg.deployment_mode == KNATIVE:
        body = manifest(build(cfg, knative_canary=True))
        body["metadata"]["annotations"].update(
            {**annotations, MODEL_URI_ANNOTATION: status.model_uri(current)}
        )
        return body
    if not status.names_its_model(current):
        raise RuntimeError(
            f"InferenceService {cfg.namespace}/{cfg.name} serves a predictor that does not "
            f"name its model in {STORAGE_URI}, which KServe's Standard-mode canary requires: "
            "deploy its version once more with canary_percent 100, then the canary"
        )
    return {
        "metadata": {"annotations": annotations},
        "spec": {"canary": [manifest(canary(cfg))]},
    }


def promote(cfg: RolloutConfig, api_client: k8s.ApiClient) -> str:
    """The running canary's version takes all the traffic; the URL once it does.

    Raises:
        RuntimeError: no canary runs, or KServe reports a failure.
        ApiError, TimeoutError: as ``deploy``.
    """
    return _end_canary(cfg, api_client, PROMOTE)


def rollback(cfg: RolloutConfig, api_client: k8s.ApiClient) -> str:
    """The running canary goes; the serving version keeps all the traffic. The URL."""
    return _end_canary(cfg, api_client, ROLLBACK)


def _end_canary(cfg: RolloutConfig, api_client: k8s.ApiClient, action: str) -> str:
    deadline = Deadline(cfg.timeout_seconds)
    objects = k8s.CustomObjectsApi(api_client)
    found = _read(objects, Service(cfg.namespace, cfg.name, ""), deadline, cfg.poll_seconds)
    where = f"InferenceService {cfg.namespace}/{cfg.name}"
    if found is None:
        raise RuntimeError(f"{where} does not exist: there is no canary to {action}")
    key, value = MANAGED_BY
    if status.labels_of(found).get(key) != value:
        raise RuntimeError(f"{where} was not created by the deploy step; it is left as it is")
    candidate = status.annotations_of(found).get(CANARY_URI_ANNOTATION)
    if not candidate:
        raise RuntimeError(
            f"{where} runs no canary to {action}: it serves {status.model_uri(found)}"
        )
    service = Service(
        cfg.namespace, cfg.name, status.annotations_of(found).get(MODE_ANNOTATION) or STANDARD
    )
    if action == PROMOTE:
        _check_canary_serves(found, service, candidate)
    serving = candidate if action == PROMOTE else status.model_uri(found) or "its version"
    log.info("%s: %s %s; %s takes all the traffic", service, action, candidate, serving)
    body = {
        "metadata": {"annotations": {MODEL_URI_ANNOTATION: serving, CANARY_URI_ANNOTATION: None}},
        "spec": _ended(found, service.mode, action),
    }
    generation = _write(objects, service, body, deadline, found)
    return _wait_until_serving(
        api_client, objects, (service, serving), generation, deadline, cfg.poll_seconds
    )


def _check_canary_serves(found: dict[str, Any], service: Service, candidate: str) -> None:
    """Refuse to promote a canary that KServe does not report ready: promoted, it would
    replace the working predictor with one that does not serve.

    Raises:
        RuntimeError: its canary is missing from the spec, or not ready.
    """
    if service.mode == KNATIVE:
        pending = status.not_serving(found, KNATIVE)
    else:
        specs = status.canaries(found)
        if len(specs) != 1:
            raise RuntimeError(
                f"{service} says {candidate} runs as its canary, but its spec.canary holds "
                f"{len(specs)} predictors (changed by hand?): nothing written; "
                "`rollout rollback` clears the canary, then deploy it again"
            )
        name = str(specs[0]["predictor"].get("name"))
        conditions = status.conditions(found)
        said = conditions.get("CanaryPredictorReady", {})
        pending = status.canary_pending(found, name)
        if not pending and said.get("status") != "True":
            reason = f"{said.get('reason', '')}: {said.get('message', '')}".strip(": ")
            pending = f"CanaryPredictorReady is not True ({reason or 'not reported'})"
    if pending:
        raise RuntimeError(
            f"not promoting {candidate} in {service}: its canary does not serve ({pending}); "
            "nothing written, the serving version keeps its traffic: `rollout rollback` "
            "removes the canary"
        )


def _ended(found: dict[str, Any], mode: str, action: str) -> dict[str, Any]:
    """The spec patch that ends a canary as KServe documents it: in Knative, the latest
    revision takes all the traffic (no ``canaryTrafficPercent``) or none (0, back to the
    last one rolled out); in Standard, the canary's predictor becomes the predictor (its
    name too, so its Deployment is kept, not restarted) or goes."""
    if mode == KNATIVE:
        return {"predictor": {"canaryTrafficPercent": None if action == PROMOTE else 0}}
    if action == ROLLBACK:
        return {"canary": None}
    (canary_spec,) = status.canaries(found)  # one, as _check_canary_serves found
    predictor = {**status.predictor(found)}
    for field in ("name", "containers", "volumes"):
        predictor[field] = canary_spec["predictor"].get(field)
    return {"predictor": predictor, "canary": None}


def _write(
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
        now = _read(objects, service, deadline, 0.5) or {}
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


def _refuse_foreign(current: dict[str, Any], cfg: DeployConfig) -> None:
    """Refuse a service this step did not create, or one in the other deployment mode."""
    where = f"InferenceService {cfg.namespace}/{cfg.name}"
    key, value = MANAGED_BY
    if status.labels_of(current).get(key) != value:
        raise RuntimeError(
            f"{where} exists and was not created by this deploy step (no label {key}={value}), "
            f"so it is left as it is: deploy under another --name, or take it over "
            f"deliberately with `kubectl label inferenceservice {cfg.name} -n {cfg.namespace} "
            f"{key}={value}`"
        )
    mode = status.annotations_of(current).get(MODE_ANNOTATION)
    if mode and mode != cfg.deployment_mode:
        raise RuntimeError(
            f"{where} serves in KServe's {mode} mode and KServe cannot change a service's "
            f"mode: deploy with deployment_mode {mode}, or under another --name"
        )


def _read(
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


def _wait_until_serving(
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
            found = _read(objects, service, deadline, poll_seconds) or {}
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
