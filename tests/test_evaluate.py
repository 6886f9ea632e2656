"""The evaluate and predict steps: known predictions, clear errors, MLflow logging."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import mlflow
import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from components import predict
from components.core import tracking
from components.evaluate import main as evaluate_main
from components.evaluation import metrics, predictions
from components.evaluation.report import evaluate
from components.training import session
from components.training.config import TrainConfig
from components.training.models import Classifier, build_model, save_classifier


def always_dog_model(directory, channels=1, size=40):
    """A tutorial net whose only say is its last bias: every image is a dog, p = 0.88."""
    net = build_model("tutorial_cnn", channels, size)
    with torch.no_grad():
        for parameter in net.parameters():
            parameter.zero_()
        net.fc2.bias.copy_(torch.tensor([0.0, 2.0]))
    spec = {
        "model": "tutorial_cnn",
        "channels": channels,
        "image_size": size,
        "mean": [0.5] * channels,
        "std": [0.25] * channels,
        "classes": ["cat", "dog"],
    }
    directory.mkdir(parents=True, exist_ok=True)
    save_classifier(directory / "model.pt", Classifier(net, spec["mean"], spec["std"]), spec)
    return directory


def test_known_predictions_give_the_expected_confusion_matrix(sample_arrays, tmp_path):
    model = always_dog_model(tmp_path / "model")
    report = evaluate(model, sample_arrays, tmp_path / "eval")
    assert report["confusion_matrix"] == [[0, 100], [0, 100]]
    assert report["metrics"]["accuracy"] == 0.5
    assert report["metrics"]["dog_accuracy"] == 1.0 and report["metrics"]["cat_accuracy"] == 0.0
    assert report["metrics"]["roc_auc"] == 0.5  # every score tied
    assert json.loads((tmp_path / "eval/metrics.json").read_text()) == report
    for name in ("roc.json", "confusion_matrix.png", "misclassified.png"):
        assert (tmp_path / "eval" / name).stat().st_size > 0


def test_metrics_on_hand_counted_scores():
    labels = np.array([0, 0, 0, 1, 1, 1, 1])
    scores = np.array([0.1, 0.6, 0.3, 0.9, 0.8, 0.4, 0.7])
    assert metrics.confusion_matrix(labels, (scores >= 0.5).astype(int)) == [[2, 1], [1, 3]]
    result = metrics.classification_metrics(labels, scores)
    assert result["precision"] == 0.75 and result["recall"] == 0.75
    assert result["accuracy"] == pytest.approx(5 / 7)
    assert result["roc_auc"] == pytest.approx(11 / 12)  # 11 of 12 dog-cat pairs ordered right
    curve = metrics.roc_curve(labels, scores)
    assert curve["fpr"][0] == 0.0 and curve["tpr"][-1] == 1.0


def test_image_size_mismatch_says_how_to_fix_it(sample_arrays, tmp_path):
    model = always_dog_model(tmp_path / "model", size=50)
    with pytest.raises(ValueError, match="expects 1×50×50 images.*--channels 1 --image-size 50"):
        evaluate(model, sample_arrays, tmp_path / "eval")


def test_missing_and_pickled_arrays_are_clear_errors(sample_arrays, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(sample_arrays, data)
    model = always_dog_model(tmp_path / "model")
    (data / "test_labels.npy").unlink()
    with pytest.raises(FileNotFoundError, match="expected test_labels.npy"):
        evaluate(model, data, tmp_path / "eval")
    np.save(
        data / "test_labels.npy", np.array([{"evil": 1}] * 200, dtype=object), allow_pickle=True
    )
    with pytest.raises(ValueError, match="reads it as pickled objects"):
        evaluate(model, data, tmp_path / "eval")


def test_missing_model_is_a_clear_error(sample_arrays, tmp_path):
    with pytest.raises(FileNotFoundError, match="expected model.pt from the train step"):
        evaluate(tmp_path / "nothing", sample_arrays, tmp_path / "eval")


def test_evaluate_logs_test_metrics_into_the_training_run(
    sample_arrays, sample_images, tmp_path, mlflow_store
):
    result = session.train(
        TrainConfig(data=str(sample_arrays), output=str(tmp_path / "m"), epochs=1)
    )
    evaluate_main(
        [
            "--model",
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
    assert {"test_f1", "test_roc_auc", "test_precision", "test_recall"} <= set(logged)
    names = {a.path for a in client.list_artifacts(result.run_id, "evaluation/test")}
    assert "evaluation/test/confusion_matrix.png" in names

    images = [sample_images / "PetImages/Cat/1.jpg", sample_images / "PetImages/Dog/1.jpg"]
    from_dir = predictions.predict_files(str(tmp_path / "m"), images).classified
    downloaded = mlflow.artifacts.download_artifacts(result.model_uri, dst_path=str(tmp_path))
    for uri in (result.model_uri, Path(downloaded).as_uri()):  # the registry's, a copy's
        from_mlflow = predictions.predict_files(uri, images).classified
        for (_, label_a, p_a), (_, label_b, p_b) in zip(from_dir, from_mlflow, strict=True):
            assert label_a == label_b and label_a in ("cat", "dog")
            assert 0.5 <= p_a <= 1.0 and p_a == pytest.approx(p_b, abs=1e-5)


def test_predict_cli_prints_one_line_per_image(sample_images, tmp_path, capsys):
    model = always_dog_model(tmp_path / "model")
    image = sample_images / "PetImages/Cat/5002.jpg"  # a CMYK JPEG
    predict.main(["--model", str(model), str(image)])
    assert capsys.readouterr().out == f"{image}\tdog\t0.8808\n"


def test_an_mlflow_model_taking_huge_images_is_refused_before_any_decoding(
    sample_images, mlflow_store
):
    """A registry model whose signature asks for 520×520 (over the 512 limit) input."""
    net = Classifier(build_model("compact_cnn", 1, 520), [0.5], [0.25])
    with tracking.start_run("dogs-vs-cats"):
        uri = tracking.log_model(net, np.full((2, 1, 520, 520), 128, np.float32))
    with pytest.raises(ValueError, match=r"found input shape \(-1, 1, 520, 520\)"):
        predictions.predict_files(uri, [sample_images / "PetImages/Dog/1.jpg"])


def test_predict_names_files_it_cannot_classify_and_classifies_the_rest(
    sample_images, tmp_path, capsys, caplog
):
    model = always_dog_model(tmp_path / "model")
    good = sample_images / "PetImages/Dog/1.jpg"
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "cut.jpg").write_bytes(good.read_bytes()[:500])
    files = [tmp_path / "empty.jpg", good, tmp_path / "cut.jpg", tmp_path / "missing.jpg", tmp_path]
    with pytest.raises(SystemExit, match="4 of 5 files could not be classified"):
        predict.main(["--model", str(model), *map(str, files)])
    assert capsys.readouterr().out == f"{good}\tdog\t0.8808\n"
    empty, cut, missing, folder = [
        r.getMessage() for r in caplog.records if r.levelname == "WARNING"
    ]
    assert empty == f"skipped {tmp_path / 'empty.jpg'}: empty file (0 bytes)"
    assert cut.startswith(f"skipped {tmp_path / 'cut.jpg'}: truncated or corrupt image data")
    assert missing == f"skipped {tmp_path / 'missing.jpg'}: no such file"
    assert folder == f"skipped {tmp_path}: not a file"


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
    original = np.load(data / "test_labels.npy")
    np.save(data / "test_labels.npy", labels(original).astype(np.int64), allow_pickle=False)
    model = always_dog_model(tmp_path / "model")
    with pytest.raises(ValueError, match=message):
        evaluate(model, data, tmp_path / "eval")
    assert not (tmp_path / "eval").exists()


class Trap(torch.nn.Module):
    """A net whose unpickling writes a file: what a hostile model in a registry could do."""

    witness = ""

    def forward(self, x):
        return x

    def __reduce__(self):
        return (open, (self.witness, "w"))


def test_a_pickled_mlflow_model_is_refused_and_its_code_never_runs(tmp_path, mlflow_store):
    trap = Trap()
    trap.witness = str(tmp_path / "pwned")
    model_dir = tmp_path / "hostile-model"
    mlflow.pytorch.save_model(
        trap, str(model_dir), serialization_format="pickle", pip_requirements=["torch"]
    )
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(Exception, match="Deserializing model using pickle is disallowed"):
        tracking.load_model(model_dir.as_uri())  # how predict and serving load MLflow models
    with pytest.raises(ValueError, match="signature of one input tensor at .*, found no signature"):
        predictions.load_any(model_dir.as_uri())  # predict's own path: refused before loading
    assert not (tmp_path / "pwned").exists()
