"""Training with ``--int8``: the quantised graph written and logged with the model where it
keeps the val accuracy, gone where it does not; served by default where the CPU multiplies
int8 exactly; evaluated beside the float32 graph, and both judged by the gate."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil

import numpy as np
import onnx
import pytest
from mlflow.tracking import MlflowClient

from components.core.identity import ModelIdentityError, sha256_of
from components.core.int8_cpu import multiplies_int8_exactly
from components.core.names import INT8_FILE, ONNX_FILE
from components.data.arrays import load_split
from components.evaluation.config import EvaluateConfig
from components.evaluation.report import evaluate
from components.registration.confidence import accuracy_at_least
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate
from components.scoring import int8, loading
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


@pytest.mark.skipif(
    not multiplies_int8_exactly(),
    reason="needs a CPU with int8 dot products (VNNI): without them 8-bit products may "
    "saturate, and the default runtime serves the float32 graph there",
)
def test_int8_answers_as_float32_on_the_val_photos_and_the_log_names_the_file(
    in_its_store, sample_arrays, caplog
):
    output, _ = in_its_store
    images, _ = load_split(sample_arrays, "val")
    with caplog.at_level(logging.INFO):
        quantised = load_scorer(str(output), "onnx-int8").scorer
    assert "scoring with ONNX Runtime (model.int8.onnx, sha256 " in caplog.text
    pixels = images.astype(np.float32)
    found, expected = quantised(pixels), load_scorer(str(output), "onnx").scorer(pixels)
    assert (found.argmax(1) == expected.argmax(1)).mean() >= 0.95
    assert np.abs(_dog(found) - _dog(expected)).max() < 0.1


def test_evaluate_on_a_cpu_scores_both_graphs_and_logs_the_int8_ones_figures_apart(
    in_its_store, sample_arrays, tmp_path
):
    output, result = in_its_store
    cfg = EvaluateConfig(
        model_dir=str(output), data=str(sample_arrays), output=str(tmp_path / "eval")
    )
    report = evaluate(cfg)  # --runtime auto: the float32 graph, then the int8 one
    assert report["scored"] == ONNX_FILE
    int8_report = json.loads((tmp_path / "eval" / "int8" / "metrics.json").read_text())
    assert int8_report["scored"] == INT8_FILE
    assert int8_report["sha256"][INT8_FILE] == sha256_of(output / INT8_FILE)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    assert metrics["test_accuracy"] == report["metrics"]["accuracy"]
    assert metrics["test_int8_accuracy"] == int8_report["metrics"]["accuracy"]
    assert abs(metrics["test_int8_accuracy"] - metrics["test_accuracy"]) <= 0.05
    copied = tmp_path / "float-only"
    shutil.copytree(output, copied)
    (copied / INT8_FILE).unlink()
    with pytest.raises(
        FileNotFoundError, match=r"expected model.int8.onnx in .* \(train with --int8\), found none"
    ):
        evaluate(EvaluateConfig(**{**vars(cfg), "model_dir": str(copied), "runtime": "onnx-int8"}))


def test_the_gate_judges_the_lower_of_the_two_graphs_and_wants_both_evaluated(
    sample_arrays, tmp_path, mlflow_store, monkeypatch
):
    """A model with an int8 graph may be served by it (the default runtime on CPUs with
    VNNI) or by its float32 graph: each must pass, and each must have been scored."""
    monkeypatch.setattr(int8, "MOST_POINTS_LOST", 100.0)
    trained = TrainConfig(
        data=str(sample_arrays), output=str(tmp_path / "m"), dry_run=True, int8=True
    )
    result = session.train(trained)
    cfg = EvaluateConfig(
        model_dir=trained.output, data=str(sample_arrays), output=str(tmp_path / "eval")
    )
    evaluate(dataclasses.replace(cfg, runtime="onnx"))  # the float32 graph alone
    with pytest.raises(
        LookupError, match=r"evaluation/test_int8/metrics.json .* \(--runtime auto scores its int8"
    ):
        register_if_accurate(RegisterConfig(mlflow_run_id=result.run_id, min_accuracy=0.0))
    evaluate(cfg)
    metrics = MlflowClient().get_run(result.run_id).data.metrics
    lower = min(metrics["test_accuracy"], metrics["test_int8_accuracy"])
    count = int(MlflowClient().get_run(result.run_id).data.params["data_test_cat"]) + int(
        MlflowClient().get_run(result.run_id).data.params["data_test_dog"]
    )
    lowest = accuracy_at_least(lower, count)  # what the lower graph's figure is at least
    decision = register_if_accurate(
        RegisterConfig(mlflow_run_id=result.run_id, min_accuracy=lowest + 1e-9)
    )
    assert not decision.registered
    assert f"test accuracy {lower:.4f} on {count} photos, at least {lowest:.4f}" in decision.reason
    assert f"its int8 graph's {metrics['test_int8_accuracy']:.4f}" in decision.reason
    decision = register_if_accurate(
        RegisterConfig(mlflow_run_id=result.run_id, min_accuracy=lowest - 1e-9)
    )
    assert decision.registered


def test_the_default_runtime_serves_the_int8_graph_where_the_cpu_multiplies_int8_exactly(
    in_its_store, monkeypatch, caplog
):
    output, _ = in_its_store
    monkeypatch.setattr(loading, "multiplies_int8_exactly", lambda: True)
    with caplog.at_level(logging.INFO):
        assert INT8_FILE in load_scorer(str(output)).files
        assert INT8_FILE not in load_scorer(str(output), "onnx").files
    monkeypatch.setattr(loading, "multiplies_int8_exactly", lambda: False)
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert INT8_FILE not in load_scorer(str(output)).files
    assert "float32 graph, not its int8 one: this CPU has no int8 dot products" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        assert INT8_FILE in load_scorer(str(output), "onnx-int8").files  # asked for by name
    assert "int8 graph on a CPU without int8 dot products (VNNI)" in caplog.text


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


def test_int8_on_too_few_val_photos_to_tell_its_loss_is_not_made_and_the_log_says_why(
    small_arrays, tmp_path, mlflow_store, caplog
):
    """100 val photos: one photo is a whole point, five times the 0.2 the gate allows. A
    preset that asks for int8 still trains on them, without the int8 graph."""
    cfg = TrainConfig(data=str(small_arrays), output=str(tmp_path / "m"), epochs=1, int8=True)
    with caplog.at_level(logging.WARNING):
        session.train(cfg)
    assert (tmp_path / "m" / ONNX_FILE).is_file()
    assert not (tmp_path / "m" / INT8_FILE).exists()
    assert "no int8 graph: 100 val photos cannot tell a loss of 0.2 points" in caplog.text


def test_few_calibration_photos_are_said_plainly(caplog):
    with caplog.at_level(logging.WARNING):
        assert int8.judgeable(20, 500)
    assert "int8: 20 train photos set the int8 ranges, fewer than the 512" in caplog.text


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


def test_calibration_holds_every_class_even_a_rare_one_among_a_hundred():
    labels = np.r_[np.repeat(np.arange(99), 30), [99]]  # class 99: one photo in 2,971
    picks = int8.calibration_picks(labels, seed=0)
    assert len(picks) == int8.CALIBRATION_PHOTOS == len(set(picks.tolist()))
    assert set(labels[picks].tolist()) == set(range(100))
    pets = np.r_[np.zeros(2000, np.int64), np.ones(2000, np.int64)]
    expected = np.random.default_rng(3).permutation(4000)[: int8.CALIBRATION_PHOTOS]
    assert np.array_equal(int8.calibration_picks(pets, seed=3), expected)  # the seed's draw


def test_calibration_in_batches_of_bounded_pixels_sets_the_ranges_one_batch_sets(
    int8_run, sample_arrays, monkeypatch
):
    """The quantiser's calibration holds every activation of its batch (13 GB for 32
    photos of 260×260): batches of at most ``CALIBRATION_PIXELS`` give the same graph."""
    output, _ = int8_run
    graph = (output / ONNX_FILE).read_bytes()
    images, _ = load_split(sample_arrays, "train")
    photos = images[:96]
    whole = int8.quantise(graph, photos)  # 40×40: all 96 in batches of 32
    monkeypatch.setattr(int8, "CALIBRATION_PIXELS", 7 * 40 * 40)
    assert int8.calibration_batch(40) == 7
    assert int8.quantise(graph, photos) == whole
    monkeypatch.undo()
    assert [int8.calibration_batch(side) for side in (260, 96, 50)] == [4, 29, 32]
