"""The Model Registry: a logged model registered with its card, names and aliases looked up."""

from __future__ import annotations

import json

import mlflow
from mlflow.entities.model_registry import RegisteredModel
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from components.core.names import CLASSES
from components.tracking import store
from components.tracking.store import REGISTRY_ABSENT, tracking_uri
from components.tracking.tags import CLASSES_TAG


def register_model(
    model_id: str, name: str, alias: str | None, description: str, tags: dict[str, str]
) -> str:
    """Register the logged model ``model_id`` under ``name`` with its model card
    (``description``, ``tags``), and point ``alias`` at it (None: no alias); the version."""
    mlflow.set_tracking_uri(tracking_uri())
    version = mlflow.register_model(f"models:/{model_id}", name, tags=tags)
    client = store.client()
    client.update_model_version(name, version.version, description=description)
    if alias:
        client.set_registered_model_alias(name, alias, version.version)
    return str(version.version)


def check_registered(uri: str) -> None:
    """Refuse, at once, a ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` that the
    registry does not hold, naming the models and aliases it does hold.

    Raises:
        LookupError: no such registered model, alias or version.
    """
    reference = uri.removeprefix("models:/")
    name, at, alias = reference.rpartition("@")
    if not at:
        name, slash, version = reference.rpartition("/")
        if not slash:
            return  # a logged model's id (models:/m-…): MLflow says what it finds
    client = store.client()
    held = {model.name: model for model in client.search_registered_models(max_results=100)}
    if name not in held:
        raise LookupError(
            f"no registered model {name!r} at {tracking_uri()}; registered: "
            + (", ".join(_described(m) for m in held.values()) or "none")
        )
    if at and alias not in (held[name].aliases or {}):
        missing = f"alias @{alias}"
    elif not at and not _has_version(client, name, version):
        missing = f"version {version!r}"
    else:
        return
    raise LookupError(f"registered model {name!r} has no {missing}: {_described(held[name])}")


def _has_version(client: MlflowClient, name: str, version: str) -> bool:
    try:
        client.get_model_version(name, version)
    except MlflowException as err:
        if err.error_code in REGISTRY_ABSENT:
            return False
        raise
    return True


def _described(model: RegisteredModel) -> str:
    """``NAME (@alias → version 1, …)``: a registered model and its aliases."""
    held = sorted((model.aliases or {}).items())
    aliases = ", ".join(f"@{alias} → version {version}" for alias, version in held)
    return f"{model.name} ({aliases or 'no aliases'})"


def alias_holder(name: str, alias: str) -> tuple[str, dict[str, str]] | None:
    """The version of registered model ``name`` that ``alias`` points at, and its tags;
    None when the model or the alias does not exist."""
    client = store.client()
    try:
        version = client.get_model_version_by_alias(name, alias)
    except MlflowException as err:
        if err.error_code in REGISTRY_ABSENT:
            return None
        raise
    return str(version.version), dict(version.tags)


def registered_classes(name: str) -> list[list[str]]:
    """The class lists of registered model ``name``'s versions (a name without ', as the
    register step's schema takes it: MLflow's filter has no escape for it), each list once (none
    where no version is registered): a version's ``classes`` tag, else the ``data_classes``
    its training run recorded, else PetImages's, which every version without either is of."""
    client = store.client()
    try:
        versions = client.search_model_versions(f"name = '{name}'", max_results=1000)
    except MlflowException as err:
        if err.error_code in REGISTRY_ABSENT:
            return []
        raise
    lists: list[list[str]] = []
    for version in versions:
        said = (version.tags or {}).get(CLASSES_TAG)
        if said is None and version.run_id:
            said = client.get_run(version.run_id).data.params.get("data_classes")
        classes = json.loads(said) if said else list(CLASSES)
        if classes not in lists:
            lists.append(classes)
    return lists
