"""Create or update the InferenceService, then wait until KServe says it is Ready.

When a version already serves, the new one comes in as a canary: it takes
``canary_percent`` of the traffic and the serving revision keeps the rest, until someone
promotes it (``canaryTrafficPercent: 100``). A load that fails, a spec the controller
refuses, or no Ready within the timeout fails the step with KServe's own reason.
"""

from __future__ import annotations

import logging
import time

from kserve import constants
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from components.cluster.kube import get_or_none
from components.deploying.config import DeployConfig
from components.deploying.inference_service import build, manifest

log = logging.getLogger(__name__)
GROUP, VERSION = constants.KSERVE_GROUP, constants.KSERVE_V1BETA1_VERSION
PLURAL = constants.KSERVE_PLURAL_INFERENCESERVICE
# KServe's modelStatus.transitionStatus values that no amount of waiting changes
STUCK = {"BlockedByFailedLoad", "InvalidSpec"}


def deploy(cfg: DeployConfig, api_client: k8s.ApiClient) -> str:
    """Serve ``cfg``'s version; its URL once Ready.

    Raises:
        RuntimeError: the cluster refused the resource, or KServe reports a failure.
        TimeoutError: not Ready within ``cfg.timeout_seconds``, with the last conditions.
    """
    objects = k8s.CustomObjectsApi(api_client)
    deadline = time.monotonic() + cfg.timeout_seconds
    current = _read(objects, cfg, deadline)
    # a version already serving keeps most traffic while the new one proves itself
    canary = current is not None and _is_ready(current) and _model_uri(current) != cfg.model_uri
    body = manifest(build(cfg, canary=canary))
    try:
        if current is None:
            log.info(
                "creating InferenceService %s/%s for %s", cfg.namespace, cfg.name, cfg.model_uri
            )
            written = objects.create_namespaced_custom_object(
                GROUP, VERSION, cfg.namespace, PLURAL, body
            )
        else:
            how = f"as a canary at {cfg.canary_percent}%" if canary else "in place"
            log.info(
                "updating InferenceService %s/%s to %s %s",
                cfg.namespace,
                cfg.name,
                cfg.model_uri,
                how,
            )
            if not canary:  # an update with no revision to keep takes all the traffic
                body["spec"]["predictor"]["canaryTrafficPercent"] = 100
            written = objects.patch_namespaced_custom_object(
                GROUP, VERSION, cfg.namespace, PLURAL, cfg.name, body
            )
    except ApiException as err:
        raise RuntimeError(
            f"the cluster refused InferenceService {cfg.namespace}/{cfg.name}: "
            f"{err.status} {err.reason}: {err.body}"
        ) from None
    return _wait_until_ready(objects, cfg, written["metadata"].get("generation", 1), deadline)


def _get(objects: k8s.CustomObjectsApi, cfg: DeployConfig) -> dict | None:
    return get_or_none(objects, GROUP, VERSION, cfg.namespace, PLURAL, cfg.name)


def _model_uri(service: dict) -> str | None:
    return service.get("metadata", {}).get("annotations", {}).get("dogs-vs-cats/model-uri")


def _conditions(service: dict) -> dict[str, dict]:
    return {c["type"]: c for c in service.get("status", {}).get("conditions", [])}


def _is_ready(service: dict) -> bool:
    return _conditions(service).get("Ready", {}).get("status") == "True"


def _failure(service: dict) -> str | None:
    """KServe's reason a revision cannot become Ready, or None while it still may."""
    model = service.get("status", {}).get("modelStatus", {})
    if model.get("transitionStatus") in STUCK:
        info = model.get("lastFailureInfo", {})
        return f"{model['transitionStatus']}: {info.get('reason', '')}: {info.get('message', '')}"
    return None


def _not_ready(service: dict) -> str:
    pending = [
        f"{kind} {c.get('reason', '')}: {c.get('message', '')}".strip()
        for kind, c in _conditions(service).items()
        if c.get("status") != "True"
    ]
    return "; ".join(pending) or "no conditions reported yet"


def _read(objects: k8s.CustomObjectsApi, cfg: DeployConfig, deadline: float) -> dict | None:
    """The service, or None; an API server that answers 5xx or not at all is waited out."""
    while True:
        try:
            return _get(objects, cfg)
        except (ApiException, HTTPError) as err:
            if isinstance(err, ApiException) and err.status < 500 or time.monotonic() > deadline:
                raise
            log.warning("could not read InferenceService %s (%s); trying again", cfg.name, err)
            time.sleep(cfg.poll_seconds)


def _wait_until_ready(
    objects: k8s.CustomObjectsApi, cfg: DeployConfig, generation: int, deadline: float
) -> str:
    where = f"InferenceService {cfg.namespace}/{cfg.name}"
    last: dict = {}
    while time.monotonic() < deadline:
        last = _read(objects, cfg, deadline) or {}
        current = last.get("status", {}).get("observedGeneration", 0) >= generation
        if current and (reason := _failure(last)):
            raise RuntimeError(f"KServe could not serve {cfg.model_uri} as {where}: {reason}")
        if current and _is_ready(last):
            url = last["status"].get("url") or last["status"].get("address", {}).get("url", "")
            log.info("%s is Ready at %s", where, url)
            return url
        time.sleep(cfg.poll_seconds)
    raise TimeoutError(
        f"{where} was not Ready within {cfg.timeout_seconds:g} s: {_not_ready(last)}"
    )
