"""Logged models, in a SQLite store: a URI resolves to the logged model whose record the
tracking store holds, or is refused; a model without a record is never vouched for.

A model logged, read back and loaded end to end: tests/training/test_session.py; its
files checked as recorded: tests/serving/test_registry.py; a pickled model refused:
tests/evaluation/test_predictions.py."""

from __future__ import annotations

import mlflow
import pytest

from components.core.identity import ModelIdentityError
from components.tracking import logged_models, registry, run_log


def test_a_registered_version_and_a_run_resolve_to_the_logged_model(mlflow_store):
    with run_log.start_run("models") as run_id:
        model_id = mlflow.initialize_logged_model(name=logged_models.MODEL_NAME).model_id
    version = registry.register_model(model_id, "dogs-vs-cats", "champion", "", {})
    for uri in (
        f"models:/dogs-vs-cats/{version}",
        "models:/dogs-vs-cats@champion",
        f"models:/{model_id}",
        f"runs:/{run_id}/model",
    ):
        assert logged_models.model_id_of(uri) == model_id, uri


@pytest.mark.parametrize("uri", ["file:///tmp/model", "s3://bucket/model", "/tmp/model"])
def test_a_uri_no_tracking_store_vouches_for_is_refused(mlflow_store, uri):
    with pytest.raises(ValueError, match="expected a model as models:/NAME@ALIAS"):
        logged_models.model_id_of(uri)


def test_a_model_whose_digests_were_never_recorded_is_not_vouched_for(mlflow_store):
    with run_log.start_run("models"):
        model_id = mlflow.initialize_logged_model(name=logged_models.MODEL_NAME).model_id
    with pytest.raises(ModelIdentityError, match=f"MLflow model {model_id} .* records no digests"):
        logged_models.recorded_identity(model_id)
    logged_models.record_identity(model_id, {"model.onnx": "a" * 64})
    assert logged_models.recorded_identity(model_id) == {"model.onnx": "a" * 64}
