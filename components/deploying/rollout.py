"""Create or update the InferenceService, then wait until KServe says it serves the version.

What "serves" means depends on KServe's deployment mode:

- Standard: KServe's ``Ready`` for the new generation, and its Deployment
  ``NAME-predictor`` rolled out (every replica updated and available, none of the old
  left), as ``kubectl rollout status`` reads it. A new version replaces the old one.
- Knative: ``Ready`` for the new generation, and the predictor's latest created revision
  is its latest ready one. A new version over a serving one may come in as a canary
  (``canary_percent`` of the traffic) until someone promotes it.

The step only updates a service that it created (its ``managed-by`` label); a load that
fails, a spec the controller refuses, or no answer within the deadline fails the step in
one line with KServe's own reason.
"""

from __future__ import annotations

import logging

from kserve import constants
from kubernetes import client as k8s

from components.cluster.kube import ApiError, Deadline
from components.deploying import status
from components.deploying.config import KNATIVE, DeployConfig
from components.deploying.inference_service import MANAGED_BY, MODE_ANNOTATION, build, manifest

log = logging.getLogger(__name__)
GROUP, VERSION = constants.KSERVE_GROUP, constants.KSERVE_V1BETA1_VERSION
PLURAL = constants.KSERVE_PLURAL_INFERENCESERVICE


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
    current = _read(objects, cfg, deadline, patient=False)
    if current is not None:
        _refuse_foreign(current, cfg)
    # a version already serving keeps most traffic while the new one proves itself
    canary = (
        cfg.canary
        and current is not None
        and status.is_ready(current)
        and status.model_uri(current) != cfg.model_uri
    )
    body = manifest(build(cfg, canary=canary))
    where = f"InferenceService {cfg.namespace}/{cfg.name}"
    args: tuple
    if current is None:
        log.info("creating %s for %s (%s mode)", where, cfg.model_uri, cfg.deployment_mode)
        request, args = objects.create_namespaced_custom_object, (body,)
    else:
        how = f"as a canary at {cfg.canary_percent}%" if canary else "with all the traffic"
        log.info("updating %s to %s %s", where, cfg.model_uri, how)
        if cfg.deployment_mode == KNATIVE and not canary:
            body["spec"]["predictor"]["canaryTrafficPercent"] = 100  # no revision to keep
        request, args = objects.patch_namespaced_custom_object, (cfg.name, body)
    verb = "create" if current is None else "update"
    written = deadline.call(
        f"{verb} {where}", request, GROUP, VERSION, cfg.namespace, PLURAL, *args
    )
    generation = status.generation(written)
    return _wait_until_serving(api_client, objects, cfg, generation, deadline)


def _refuse_foreign(current: dict, cfg: DeployConfig) -> None:
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
    objects: k8s.CustomObjectsApi, cfg: DeployConfig, deadline: Deadline, patient: bool = True
) -> dict | None:
    """The service, or None. ``patient``: an API server that answers 5xx or not at all is
    waited out within the deadline, which then ends in the last refusal seen; else (the
    first request, before anything was written) any failure is final at once."""
    refused: ApiError | None = None
    while True:
        try:
            return deadline.call(
                f"read InferenceService {cfg.namespace}/{cfg.name}",
                objects.get_namespaced_custom_object,
                GROUP,
                VERSION,
                cfg.namespace,
                PLURAL,
                cfg.name,
            )
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
            deadline.sleep(cfg.poll_seconds)


def _wait_until_serving(
    api_client: k8s.ApiClient,
    objects: k8s.CustomObjectsApi,
    cfg: DeployConfig,
    generation: int,
    deadline: Deadline,
) -> str:
    where = f"InferenceService {cfg.namespace}/{cfg.name}"
    pending = "no status reported yet"
    while deadline.left() > 0:
        service = _read(objects, cfg, deadline) or {}
        if status.observed(service) >= generation:
            if reason := status.failure(service):
                raise RuntimeError(f"KServe could not serve {cfg.model_uri} as {where}: {reason}")
            pending = status.not_serving(service, cfg.deployment_mode)
            if not pending and cfg.deployment_mode != KNATIVE:
                pending = _rollout_pending(api_client, cfg, deadline)
            if not pending:
                url = status.url(service)
                log.info("%s serves %s at %s", where, cfg.model_uri, url)
                return url
        deadline.sleep(cfg.poll_seconds)
    raise TimeoutError(f"{where} was not serving within {cfg.timeout_seconds:g} s: {pending}")


def _rollout_pending(api_client: k8s.ApiClient, cfg: DeployConfig, deadline: Deadline) -> str:
    """What the Standard mode's Deployment still waits for, or "" once rolled out."""
    name = f"{cfg.name}-predictor"  # KServe's name for the predictor's Deployment
    try:
        found = deadline.call(
            f"read Deployment {cfg.namespace}/{name}",
            k8s.AppsV1Api(api_client).read_namespaced_deployment,
            name,
            cfg.namespace,
        )
    except ApiError as err:
        if err.status == 404 and err.reason == "NotFound":
            return f"Deployment {name} not created yet"
        raise
    return status.rollout_pending(api_client.sanitize_for_serialization(found))
