"""Classifying files with a train output or an MLflow model: known answers, clear refusals."""

from __future__ import annotations

import shutil

import mlflow
import numpy as np
import pytest
import torch

from components import predict
from components.core import identity
from components.evaluation import predictions
from components.networks.models import Classifier, build_model
from components.scoring.loading import load_scorer
from components.tracking import logged_models, run_log
from tests.support.models import always_dog_model, nan_model, seeded_model


def test_predict_cli_prints_one_line_per_image(sample_images, tmp_path, capsys):
    model = always_dog_model(tmp_path / "model")
    image = sample_images / "PetImages/Cat/5002.jpg"  # a CMYK JPEG
    predict.main(["--model", str(model), str(image)])
    assert capsys.readouterr().out == f"{image}\tdog\t0.8808\n"


def test_predict_cli_gives_the_same_line_by_onnx_runtime_and_by_torch(
    sample_images, tmp_path, capsys
):
    model = seeded_model(tmp_path / "model")
    image = str(sample_images / "PetImages/Dog/1.jpg")
    outputs = []
    for runtime in ("onnx", "torch"):
        predict.main(["--model", str(model), "--runtime", runtime, image])
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and outputs[0].startswith(f"{image}\t")


def test_an_mlflow_model_taking_huge_images_is_refused_before_any_decoding(
    sample_images, mlflow_store, tmp_path
):
    """A registry model whose signature asks for 520×520 (over the 512 limit) input,
    scored by torch (its ONNX file is refused in tests/scoring/test_loading.py)."""
    net = Classifier(build_model("compact_cnn", 1, 520), [0.5], [0.25])
    (tmp_path / "model.onnx").write_bytes(b"not read")
    with run_log.start_run("dogs-vs-cats"):
        example = np.full((2, 1, 520, 520), 128, np.float32)
        digests = {"model.onnx": identity.sha256_of(tmp_path / "model.onnx")}
        uri = logged_models.log_model(
            net, example, digests, [tmp_path / "model.onnx"], ["cat", "dog"], views=1
        )
    with pytest.raises(ValueError, match=r"found input shape \(-1, 1, 520, 520\)"):
        predictions.predict_files(uri, [sample_images / "PetImages/Dog/1.jpg"], "torch")


def test_predict_names_files_it_cannot_classify_and_classifies_the_rest(
    sample_images, tmp_path, capsys, caplog
):
    model = always_dog_model(tmp_path / "model")
    good = sample_images / "PetImages/Dog/1.jpg"
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "cut.jpg").write_bytes(good.read_bytes()[:500])
    files = [tmp_path / "empty.jpg", good, tmp_path / "cut.jpg", tmp_path / "missing.jpg"]
    with pytest.raises(SystemExit, match="3 of 4 files could not be classified"):
        predict.main(["--model", str(model), *map(str, files)])
    assert capsys.readouterr().out == f"{good}\tdog\t0.8808\n"
    empty, cut, missing = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert empty == f"skipped {tmp_path / 'empty.jpg'}: empty file (0 bytes)"
    assert cut.startswith(f"skipped {tmp_path / 'cut.jpg'}: truncated or corrupt image data")
    assert missing == f"skipped {tmp_path / 'missing.jpg'}: no such file"


def test_predict_takes_a_folder_of_photos_as_they_come(sample_images, tmp_path, capsys):
    """A user's folder: photos by name, in subfolders too; notes and hidden files left out."""
    model = always_dog_model(tmp_path / "model")
    album = tmp_path / "album"
    for name in ("b.jpg", "a.JPG", "trip/c.png", ".thumbs/d.jpg"):
        (album / name).parent.mkdir(parents=True, exist_ok=True)
        (album / name).write_bytes((sample_images / "PetImages/Cat/1.jpg").read_bytes())
    (album / "notes.txt").write_text("not a photo")
    predict.main(["--model", str(model), str(album)])
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"{album / name}\tdog\t0.8808" for name in ("a.JPG", "b.jpg", "trip/c.png")]


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
        logged_models.load_model(model_dir.as_uri())  # how predict and serving load MLflow models
    with pytest.raises(ValueError, match="found neither: the files cannot be checked"):
        load_scorer(model_dir.as_uri())  # predict's own path: no record, refused unread
    assert not (tmp_path / "pwned").exists()


@pytest.mark.parametrize("model", ["/no/such/dir", "photo.jpg"])
def test_a_model_that_is_neither_a_folder_nor_a_uri_is_one_line(tmp_path, model, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "photo.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(SystemExit) as stopped:
        predict.main(["--model", model, "photo.jpg"])
    message = str(stopped.value)
    assert message.startswith("error: expected a train output folder, an MLflow model's folder")
    assert ("a file" if model == "photo.jpg" else "nothing there") in message


def test_a_runs_uri_whose_server_does_not_answer_is_one_line_at_once(tmp_path, monkeypatch):
    from tests.support.servers import free_port

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(SystemExit, match="^error: the MLflow tracking server at .* unreachable"):
        predict.main(["--model", "runs:/0123/model", str(tmp_path / "x.jpg")])


def test_a_file_name_cannot_forge_an_output_line(sample_images, tmp_path, capsys):
    model = always_dog_model(tmp_path / "m", size=40)
    forged = tmp_path / "forged.jpg\tcat\t1.0000\nother.jpg"
    shutil.copyfile(sample_images / "PetImages/Dog/1.jpg", forged)
    predict.main(["--model", str(model), str(forged)])
    (line,) = capsys.readouterr().out.splitlines()
    name, label, probability = line.split("\t")
    assert name.endswith("forged.jpg\\tcat\\t1.0000\\nother.jpg") and label == "dog"


def test_non_finite_logits_end_predict_in_one_line_with_no_class(sample_images, tmp_path, capsys):
    model = nan_model(tmp_path / "nan")
    with pytest.raises(SystemExit, match="error: expected finite logits from the model, found"):
        predict.main(["--model", str(model), str(sample_images / "PetImages/Dog/1.jpg")])
    assert capsys.readouterr().out == ""
