"""The evaluate step: known predictions, clear errors, MLflow logging."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from components.evaluate import main as evaluate_main
from components.evaluation import predictions
from components.evaluation.config import EvaluateConfig
from components.evaluation.report import evaluate
from components.training import session
from components.training.config import TrainConfig
from tests.support.helpers import npy_bytes, plant_shard_file
from tests.support.models import always_dog_model, seeded_model
from tests.support.processes import HANG_SECONDS
from tests.support.servers import REPO


def test_known_predictions_give_the_expected_confusion_matrix(sample_arrays, tmp_path):
    model = always_dog_model(tmp_path / "model")
    report = evaluate(
        EvaluateConfig(model_dir=str(model), data=str(sample_arrays), output=str(tmp_path / "eval"))
    )
    assert report["confusion_matrix"] == [[0, 98], [0, 104]]
    assert report["metrics"]["accuracy"] == 104 / 202
    assert report["metrics"]["dog_recall"] == 1.0 and report["metrics"]["cat_recall"] == 0.0
    assert report["metrics"]["cat_precision"] == 0.0 and report["metrics"][
        "dog_f1"
    ] == pytest.approx(208 / 306)
    assert report["metrics"]["roc_auc"] == 0.5  # every score tied
    assert report["classes"] == ["cat", "dog"]
    assert json.loads((tmp_path / "eval/metrics.json").read_text()) == report
    for name in ("roc.json", "confusion_matrix.png", "misclassified.png"):
        assert (tmp_path / "eval" / name).stat().st_size > 0


def test_onnx_runtime_and_torch_give_the_same_report(sample_arrays, tmp_path):
    """A net of varied answers: every metric alike, the scores within 1e-4 (ROC points)."""
    model = seeded_model(tmp_path / "model")
    reports = [
        evaluate(
            EvaluateConfig(
                model_dir=str(model),
                data=str(sample_arrays),
                output=str(tmp_path / runtime),
                runtime=runtime,
            )
        )
        for runtime in ("onnx", "torch")
    ]
    assert reports[0]["confusion_matrix"] == reports[1]["confusion_matrix"]
    for name, value in reports[1]["metrics"].items():
        assert reports[0]["metrics"][name] == pytest.approx(value, abs=1e-4)


def test_on_a_cpu_the_model_is_evaluated_without_loading_torch(sample_arrays, tmp_path):
    """The step's work in a process of its own, on this machine without a GPU: the
    ONNX graph scored, the report written, and torch never imported."""
    model = seeded_model(tmp_path / "model")
    probe = (
        "import sys\n"
        "from components.evaluation.config import EvaluateConfig\n"
        "from components.evaluation.report import evaluate\n"
        "report = evaluate(EvaluateConfig(model_dir=sys.argv[1], data=sys.argv[2], "
        "output=sys.argv[3]))\n"
        "print(report['scored'], report['count'], 'torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(model), str(sample_arrays), str(tmp_path / "eval")],
        capture_output=True, text=True, timeout=HANG_SECONDS, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["model.onnx", "202", "False"]
    assert (tmp_path / "eval/metrics.json").is_file()


def test_image_size_mismatch_says_how_to_fix_it(sample_arrays, tmp_path):
    model = always_dog_model(tmp_path / "model", size=50)
    with pytest.raises(ValueError, match="expects 1×50×50 images.*--channels 1 --image-size 50"):
        evaluate(
            EvaluateConfig(
                model_dir=str(model), data=str(sample_arrays), output=str(tmp_path / "eval")
            )
        )


def test_missing_and_pickled_arrays_are_clear_errors(sample_arrays, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(sample_arrays, data)
    model = always_dog_model(tmp_path / "model")
    (data / "test_labels_00000.npy").unlink()
    with pytest.raises(FileNotFoundError, match="expected test_labels_00000.npy"):
        evaluate(
            EvaluateConfig(model_dir=str(model), data=str(data), output=str(tmp_path / "eval"))
        )
    evil = np.array([{"evil": 1}] * 200, dtype=object)
    plant_shard_file(data, "test_labels_00000.npy", npy_bytes(evil, allow_pickle=True))
    with pytest.raises(ValueError, match="reads it as pickled objects"):
        evaluate(
            EvaluateConfig(model_dir=str(model), data=str(data), output=str(tmp_path / "eval"))
        )


def test_missing_model_is_a_clear_error(sample_arrays, tmp_path):
    with pytest.raises(FileNotFoundError, match="expected model.pt from the train step"):
        evaluate(
            EvaluateConfig(
                model_dir=str(tmp_path / "nothing"),
                data=str(sample_arrays),
                output=str(tmp_path / "eval"),
            )
        )


def test_evaluate_logs_test_metrics_into_the_training_run(
    sample_arrays, sample_images, tmp_path, mlflow_store
):
    result = session.train(
        TrainConfig(data=str(sample_arrays), output=str(tmp_path / "m"), epochs=1)
    )
    evaluate_main(
        [
            "--model-dir",
            str(tmp_path / "m"),
            "--data",
            str(sample_arrays),
            "--output",
            str(tmp_path / "eval"),
        ]
    )
    client = MlflowClient(mlflow_store)
    logged = client.get_run(result.run_id).data.metrics
    report = json.loads((tmp_path / "eval/metrics.json").read_text())
    assert logged["test_accuracy"] == pytest.approx(report["metrics"]["accuracy"])
    meta = json.loads((sample_arrays / "meta.json").read_text())
    assert report["photos"] == meta["photos_sha256"]["test"]  # what the gate compares across sizes
    assert {"test_macro_f1", "test_roc_auc", "test_cat_precision", "test_dog_recall"} <= set(logged)
    for name in ("metrics.json", "confusion_matrix.png", "misclassified.png"):  # as written
        logged_file = mlflow.artifacts.download_artifacts(
            run_id=result.run_id, artifact_path=f"evaluation/test/{name}", dst_path=str(tmp_path)
        )
        assert Path(logged_file).read_bytes() == (tmp_path / "eval" / name).read_bytes()

    images = [sample_images / "PetImages/Cat/1.jpg", sample_images / "PetImages/Dog/1.jpg"]
    from_dir = predictions.predict_files(str(tmp_path / "m"), images).classified
    downloaded = mlflow.artifacts.download_artifacts(result.model_uri, dst_path=str(tmp_path))
    for uri in (result.model_uri, Path(downloaded).as_uri()):  # the registry's, a copy's
        from_mlflow = predictions.predict_files(uri, images).classified
        for (_, label_a, p_a), (_, label_b, p_b) in zip(from_dir, from_mlflow, strict=True):
            assert label_a == label_b and label_a in ("cat", "dog")
            assert 0.5 <= p_a <= 1.0 and p_a == pytest.approx(p_b, abs=1e-5)


def test_evaluate_stopped_while_it_logs_leaves_the_training_run_finished(
    small_arrays, tmp_path, mlflow_store, monkeypatch
):
    """An evicted pod's SIGTERM (a KeyboardInterrupt in the step) or a SIGKILL half-way
    through logging: the training run's status is what its training left, at every point."""
    from components.tracking import run_log

    result = session.train(
        TrainConfig(data=str(small_arrays), output=str(tmp_path / "m"), dry_run=True)
    )
    client = MlflowClient(mlflow_store)
    seen = []

    def stopped(*args):
        seen.append(client.get_run(result.run_id).info.status)  # a SIGKILL here keeps this
        raise KeyboardInterrupt

    monkeypatch.setattr(run_log, "log_artifacts_into", stopped)
    config = EvaluateConfig(
        model_dir=str(tmp_path / "m"), data=str(small_arrays), output=str(tmp_path / "e")
    )
    with pytest.raises(KeyboardInterrupt):
        evaluate(config)
    assert seen == ["FINISHED"]
    assert client.get_run(result.run_id).info.status == "FINISHED"


@pytest.mark.parametrize(
    ("labels", "message"),
    [
        (lambda y: np.where(np.arange(len(y)) == 3, -1, y), "found -1 at index 3"),
        (lambda y: y + 1, r"found 2 at index \d+"),
        (lambda y: y[:0], "expected .* int64 labels|found none"),
    ],
)
def test_labels_other_than_cat_and_dog_are_refused_before_anything_is_logged(
    sample_arrays, tmp_path, mlflow_store, labels, message
):
    data = tmp_path / "data"
    shutil.copytree(sample_arrays, data)
    original = np.load(data / "test_labels_00000.npy")
    plant_shard_file(data, "test_labels_00000.npy", npy_bytes(labels(original).astype(np.int64)))
    model = always_dog_model(tmp_path / "model")
    with pytest.raises(ValueError, match=message):
        evaluate(
            EvaluateConfig(model_dir=str(model), data=str(data), output=str(tmp_path / "eval"))
        )
    assert not (tmp_path / "eval").exists()


def test_a_folder_evaluate_did_not_write_is_refused_before_scoring_and_kept(
    sample_arrays, tmp_path
):
    model = always_dog_model(tmp_path / "model")
    notes = tmp_path / "NOTES"
    notes.mkdir()
    (notes / "metrics.json").write_text("my own metrics")
    (notes / "roc.json").write_text("my own curve")
    with pytest.raises(SystemExit, match="^error: refusing to replace .*NOTES: it was not written"):
        evaluate_main(
            ["--model-dir", str(model), "--data", str(sample_arrays), "--output", str(notes)]
        )
    assert (notes / "metrics.json").read_text() == "my own metrics"
    assert sorted(p.name for p in notes.iterdir()) == ["metrics.json", "roc.json"]
    with pytest.raises(SystemExit, match="^error: refusing to replace /: it was not written"):
        evaluate_main(["--model-dir", str(model), "--data", str(sample_arrays), "--output", "/"])
    assert not Path("/metrics.json").exists()
    again = tmp_path / "eval"
    for _ in range(2):  # its own output is replaced whole
        evaluate_main(
            ["--model-dir", str(model), "--data", str(sample_arrays), "--output", str(again)]
        )
    assert (again / "metrics.json").is_file()
