"""Which version serves: ``deploy`` creates or updates the InferenceService, and
``promote`` or ``rollback`` ends a canary; each waits until KServe says it serves.

A new version over a serving one comes in whole, or as a canary (``canary_percent`` of the
traffic, 0 a dark launch) until ``promote`` gives it all the traffic or ``rollback``
removes it (``components.deploying.service_api`` says what "serves" means in each of
KServe's modes).

The step only updates a service that it created (its ``managed-by`` label); a load that
fails, a spec the controller refuses, or no answer within the deadline fails the step in
one line with KServe's own reason.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes import client as k8s

from components.cluster.kube import Deadline
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
from components.deploying.service_api import Service, read, wait_until_serving, write

log = logging.getLogger(__name__)


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
    current = read(objects, service, deadline, cfg.poll_seconds, patient=False)
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
    generation = write(objects, service, body, deadline, current)
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
    return wait_until_serving(
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
    found = read(objects, Service(cfg.namespace, cfg.name, ""), deadline, cfg.poll_seconds)
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
    generation = write(objects, service, body, deadline, found)
    return wait_until_serving(
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
