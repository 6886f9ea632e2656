"""The Model Registry, in a SQLite store: a logged model registered with its card, and a
name, alias or version it does not hold refused naming what it holds."""

from __future__ import annotations

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from components.tracking import registry, run_log


def logged_model() -> str:
    with run_log.start_run("registry"):
        return mlflow.initialize_logged_model(name="model").model_id


def test_a_logged_model_is_registered_with_its_card_and_alias(mlflow_store):
    model_id = logged_model()
    version = registry.register_model(
        model_id, "dogs-vs-cats", "champion", "the card", {"test_accuracy": "0.9"}
    )
    held = MlflowClient(mlflow_store).get_model_version("dogs-vs-cats", version)
    assert held.description == "the card" and held.tags == {"test_accuracy": "0.9"}
    assert held.source == f"models:/{model_id}"
    assert registry.alias_holder("dogs-vs-cats", "champion") == (version, held.tags)
    assert registry.alias_holder("dogs-vs-cats", "canary") is None
    assert registry.alias_holder("cats-vs-dogs", "champion") is None


def test_what_the_registry_does_not_hold_is_refused_naming_what_it_holds(mlflow_store):
    registry.register_model(logged_model(), "dogs-vs-cats", "champion", "", {})
    registry.check_registered("models:/dogs-vs-cats@champion")
    registry.check_registered("models:/dogs-vs-cats/1")
    held = r"dogs-vs-cats \(@champion → version 1\)"
    with pytest.raises(LookupError, match=f"no registered model 'cats' .*registered: {held}"):
        registry.check_registered("models:/cats@champion")
    with pytest.raises(LookupError, match=f"has no alias @canary: {held}"):
        registry.check_registered("models:/dogs-vs-cats@canary")
    with pytest.raises(LookupError, match=f"has no version '7': {held}"):
        registry.check_registered("models:/dogs-vs-cats/7")
