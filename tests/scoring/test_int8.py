"""Training with ``--int8``: the quantised graph written and logged with the model where it
keeps the val accuracy, gone where it does not; predicted and evaluated by name."""

from __future__ import annotations

import dataclasses
import logging
import shutil

import numpy as np
import onnx
import pytest
from mlflow.tracking import MlflowClient

from components.core.identity import ModelIdentityError
from components.core.names import INT8_FILE, ONNX_FILE
from components.data.arrays import load_split
from components.evaluation.config import EvaluateConfig
from components.evaluation.report import evaluate
from components.scoring import int8
from components.scoring.loading import load_scorer
from components.scoring.onnx_file import read_onnx
from components.tracking import logged_models
from components.training import session
from components.training.config import TrainConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def int8_run(sample_arrays, empty_mlflow_db, tmp_path_factory):
    """The tutorial net trained 3 epochs on the sample with ``int8``, its gate open (the
    gate's verdict on 200 val photos is a photo or two either way): (output, result)."""
    work = tmp_path_factory.mktemp("int8")
    shutil.copyfile(empty_mlflow_db, work / "mlflow.db")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{work / 'mlflow.db'}")
        patch.delenv("MLFLOW_RUN_ID", raising=False)
        patch.chdir(work)
        patch.setattr(int8, "MOST_POINTS_LOST", 100.0)
        cfg = TrainConfig(data=str(sample_arrays), output=str(work / "model"), epochs=3, int8=True)
        result = session.train(cfg)
    return work / "model", result


@pytest.fixture
def in_its_store(int8_run, monkeypatch):
    output, result = int8_run
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{output.parent / 'mlflow.db'}")
    monkeypatch.chdir(output.parent)
    return output, result


def test_the_int8_graph_is_standard_onnx_beside_the_float_one_and_logged_with_the_model(
    in_its_store, tmp_path
):
    output, result = in_its_store
    quantised = onnx.load_from_string(read_onnx(output / INT8_FILE))  # standard operators only
    operators = {node.op_type for node in quantised.graph.node}
    assert {"QuantizeLinear", "DequantizeLinear", "Conv"} <= operators
    assert (output / INT8_FILE).stat().st_size < (output / ONNX_FILE).stat().st_size / 2
    run = MlflowClient().get_run(result.run_id)
    assert 0.5 < run.data.metrics["val_accuracy_int8"] <= 1.0
    logged = logged_models.download_model(result.model_uri, tmp_path)
    assert (logged / INT8_FILE).read_bytes() == (output / INT8_FILE).read_bytes()


def test_int8_answers_as_float32_on_the_val_photos_and_the_log_names_the_file(
    in_its_store, sample_arrays, caplog
):
    output, _ = in_its_store
    images, _ = load_split(sample_arrays, "val")
    with caplog.at_level(logging.INFO):
        quantised = load_scorer(str(output), "onnx-int8").scorer
    assert "scoring with ONNX Runtime (model.int8.onnx)" in caplog.text
    pixels = images.astype(np.float32)
    found, expected = quantised(pixels), load_scorer(str(output), "onnx").scorer(pixels)
    assert (found.argmax(1) == expected.argmax(1)).mean() >= 0.95
    assert np.abs(_dog(found) - _dog(expected)).max() < 0.1


def test_evaluate_by_int8_logs_its_figures_apart_from_the_float_models(
    in_its_store, sample_arrays, tmp_path
):
    output, result = in_its_store
    cfg = EvaluateConfig(
        model_dir=str(output), data=str(sample_arrays), output=str(tmp_path / "eval")
    )
    evaluate(cfg)
    evaluate(
        EvaluateConfig(**{**vars(cfg), "output": str(tmp_path / "int8"), "runtime": "onnx-int8"})
    )
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert abs(metrics["test_int8_accuracy"] - metrics["test_accuracy"]) <= 0.05
    copied = tmp_path / "float-only"
    shutil.copytree(output, copied)
    (copied / INT8_FILE).unlink()
    with pytest.raises(
        FileNotFoundError, match=r"expected model.int8.onnx in .* \(train with --int8\), found none"
    ):
        evaluate(EvaluateConfig(**{**vars(cfg), "model_dir": str(copied), "runtime": "onnx-int8"}))


def test_a_graph_that_loses_val_accuracy_in_int8_is_not_kept_and_an_earlier_one_goes(
    small_arrays, tmp_path, mlflow_store, monkeypatch, caplog
):
    cfg = TrainConfig(data=str(small_arrays), output=str(tmp_path / "m"), dry_run=True, int8=True)
    monkeypatch.setattr(int8, "MOST_POINTS_LOST", 100.0)
    session.train(cfg)
    assert (tmp_path / "m" / INT8_FILE).is_file()
    monkeypatch.setattr(int8, "MOST_POINTS_LOST", -1.0)  # nothing passes
    with caplog.at_level(logging.WARNING):
        result = session.train(dataclasses.replace(cfg, overwrite=True))
    assert not (tmp_path / "m" / INT8_FILE).exists()  # not the other weights' graph
    assert f"no {INT8_FILE}: in int8 the val accuracy is" in caplog.text
    assert "(at most -1.0 allowed)" in caplog.text
    assert "val_accuracy_int8" in MlflowClient().get_run(result.run_id).data.metrics
    logged = logged_models.download_model(result.model_uri, tmp_path / "logged")
    assert (logged / ONNX_FILE).is_file() and not (logged / INT8_FILE).exists()


def _dog(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted[:, 1] / shifted.sum(axis=1)


def test_int8_on_too_few_val_photos_to_tell_its_loss_is_refused_before_training(
    small_arrays, tmp_path, mlflow_store, caplog
):
    """100 val photos: one photo is a whole point, five times the 0.2 the gate allows."""
    cfg = TrainConfig(data=str(small_arrays), output=str(tmp_path / "m"), epochs=1, int8=True)
    with pytest.raises(ValueError, match="--int8 needs at least 500 val photos .* found 100"):
        session.train(cfg)
    client = MlflowClient(mlflow_store)
    assert client.search_runs([e.experiment_id for e in client.search_experiments()]) == []


def test_few_calibration_photos_are_said_plainly(monkeypatch, caplog):
    with caplog.at_level(logging.WARNING):
        int8.check_enough_photos(20, 500)
    assert "--int8: 20 train photos set the int8 ranges, fewer than the 512" in caplog.text


def test_an_int8_graph_swapped_for_another_is_never_scored_as_the_runs(
    in_its_store, sample_arrays, tmp_path
):
    output, result = in_its_store
    copied = tmp_path / "swapped"
    shutil.copytree(output, copied)
    shutil.copyfile(copied / ONNX_FILE, copied / INT8_FILE)  # a graph, not the run's int8 one
    cfg = EvaluateConfig(
        model_dir=str(copied), data=str(sample_arrays), output=str(tmp_path / "e"),
        runtime="onnx-int8",
    )  # fmt: skip
    client = MlflowClient(f"sqlite:///{output.parent / 'mlflow.db'}")
    before = client.get_run(result.run_id).data.metrics
    with pytest.raises(ModelIdentityError, match=f"refusing {copied / INT8_FILE}: its sha256"):
        evaluate(cfg)
    assert client.get_run(result.run_id).data.metrics == before
