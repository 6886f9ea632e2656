"""Reading an InferenceService (and its Deployment) as the API returns them, shape checked.

A resource whose fields are not of the kinds KServe and Kubernetes write (a status that is
a string, conditions that are not a list of objects) is refused in one line, never
followed into a traceback.
"""

from __future__ import annotations

from typing import Any

from components.core.errors import printable
from components.deploying.inference_service import MODEL_URI_ANNOTATION, STORAGE_URI

# KServe's modelStatus.transitionStatus values that no amount of waiting changes
STUCK = {"BlockedByFailedLoad", "InvalidSpec"}


def _field(resource: Any, *path: str, kind: type = dict) -> Any:
    """``resource[path…]``, empty where absent; refused where present but of another kind."""
    value: Any = resource
    for depth, key in enumerate(path):
        if not isinstance(value, dict):
            where = ".".join(path[:depth]) or "the resource"
            raise RuntimeError(
                f"expected {where} to be an object as KServe writes it, found "
                f"{printable(repr(value))[:100]}"
            )
        value = value.get(key)
    if value is None:
        return kind()
    if not isinstance(value, kind):
        raise RuntimeError(
            f"expected {'.'.join(path)} to be a {kind.__name__}, found "
            f"{printable(repr(value))[:100]}"
        )
    return value


def labels_of(service: dict[str, Any]) -> dict[str, Any]:
    labels: dict[str, Any] = _field(service, "metadata", "labels")
    return labels


def annotations_of(service: dict[str, Any]) -> dict[str, Any]:
    annotations: dict[str, Any] = _field(service, "metadata", "annotations")
    return annotations


def model_uri(service: dict[str, Any]) -> str | None:
    return annotations_of(service).get(MODEL_URI_ANNOTATION)


def generation(service: dict[str, Any]) -> int:
    return _field(service, "metadata", "generation", kind=int) or 1


def observed(service: dict[str, Any]) -> int:
    generation: int = _field(service, "status", "observedGeneration", kind=int)
    return generation


def conditions(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found = _field(service, "status", "conditions", kind=list)
    if not all(isinstance(c, dict) and isinstance(c.get("type"), str) for c in found):
        raise RuntimeError(
            f"expected status.conditions to be objects with a type, found "
            f"{printable(repr(found))[:100]}"
        )
    return {c["type"]: c for c in found}


def is_ready(service: dict[str, Any]) -> bool:
    return conditions(service).get("Ready", {}).get("status") == "True"


def failure(service: dict[str, Any]) -> str | None:
    """KServe's reason a revision cannot become Ready, or None while it still may."""
    model = _field(service, "status", "modelStatus")
    if model.get("transitionStatus") in STUCK:
        info = _field(model, "lastFailureInfo")
        said = f"{model['transitionStatus']}: {info.get('reason', '')}: {info.get('message', '')}"
        return printable(said)
    return None


def not_serving(service: dict[str, Any], mode: str) -> str:
    """What KServe still reports as not ready, or "" once the service is Ready (in the
    Knative mode, on its latest revision)."""
    pending = [
        printable(f"{kind} {c.get('reason', '')}: {c.get('message', '')}".strip())
        for kind, c in conditions(service).items()
        if c.get("status") != "True"
    ]
    if not pending and not is_ready(service):
        pending = ["Ready not reported yet"]
    if not pending and mode == "Knative":
        predictor = _field(service, "status", "components", "predictor")
        created, ready = (
            predictor.get("latestCreatedRevision"),
            predictor.get("latestReadyRevision"),
        )
        if created != ready:
            pending = [printable(f"revision {created} not ready yet (serving {ready})")]
    return "; ".join(pending)


def url(service: dict[str, Any]) -> str:
    """The external URL, else the cluster-local one."""
    found = _field(service, "status", "url", kind=str)
    return printable(found or _field(service, "status", "address", "url", kind=str))


def rollout_pending(deployment: dict[str, Any]) -> str:
    """What a Deployment's rollout still waits for, or "" once complete (as ``kubectl
    rollout status`` reads it)."""
    wanted = _field(deployment, "spec", "replicas", kind=int)
    state = _field(deployment, "status")
    counts = {
        key: _field(state, key, kind=int)
        for key in ("observedGeneration", "replicas", "updatedReplicas", "availableReplicas")
    }
    if counts["observedGeneration"] < generation(deployment):
        return "the Deployment's new spec not yet seen by its controller"
    if counts["updatedReplicas"] < wanted:
        return f"{counts['updatedReplicas']} of {wanted} pods updated"
    if counts["replicas"] > counts["updatedReplicas"]:
        return f"{counts['replicas'] - counts['updatedReplicas']} old pods still terminating"
    if counts["availableReplicas"] < counts["updatedReplicas"]:
        return (
            f"{counts['availableReplicas']} of {counts['updatedReplicas']} updated pods available"
        )
    return ""


def predictor(service: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = _field(service, "spec", "predictor")
    return spec


def canaries(service: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = _field(service, "spec", "canary", kind=list)
    if not all(isinstance(c, dict) and isinstance(c.get("predictor"), dict) for c in found):
        raise RuntimeError(
            f"expected spec.canary as KServe writes it, found {printable(repr(found))[:100]}"
        )
    return found


def names_its_model(service: dict[str, Any]) -> bool:
    """Whether the predictor names its model as KServe's Standard-mode canary requires of
    a custom container: a ``STORAGE_URI`` on its ``kserve-container``."""
    containers = _field(service, "spec", "predictor", "containers", kind=list)
    return any(
        isinstance(c, dict)
        and c.get("name") == "kserve-container"
        and any(isinstance(e, dict) and e.get("name") == STORAGE_URI for e in c.get("env") or [])
        for c in containers
    )


def canary_pending(service: dict[str, Any], name: str) -> str:
    """What the Standard-mode canary ``name`` still waits for, as KServe reports it in its
    ``canaryStatuses``; "" once it is ready."""
    statuses = _field(service, "status", "canaryStatuses", kind=list)
    mine = [s for s in statuses if isinstance(s, dict) and s.get("name") == name]
    if not mine:
        return f"canary {printable(name)} not reported yet"
    if mine[0].get("ready") is not True:
        return f"canary {printable(name)} not ready yet"
    return ""
