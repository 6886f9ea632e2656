"""Champion and challenger on the same photos: the alias's holder, tested on another split
(and at another size), is scored again on the challenger's test photos by the gate."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from components import register
from components.core.names import TEST_PHOTOS_DIR
from components.data.arrays import load_split
from components.evaluation.config import EvaluateConfig
from components.evaluation.predictions import predict_files
from components.evaluation.report import evaluate
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate
from components.registration.rescore import score_holder
from components.training import session
from components.training.config import TrainConfig

NAME = "dogs-vs-cats"


@pytest.fixture(scope="module")
def two_splits(sample_images, tmp_path_factory) -> tuple[Path, Path]:
    """The sample preprocessed twice: grey 40×40 split with seed 0, and RGB 48×48 split
    with seed 1 (other test photos, at another size and channel count)."""
    folder = tmp_path_factory.mktemp("two-splits")
    made = []
    for name, size, channels, seed in (("first", 40, 1, 0), ("second", 48, 3, 1)):
        target = folder / name
        build_arrays(
            PreprocessConfig(
                input=str(sample_images),
                output=str(target),
                image_size=size,
                channels=channels,
                split_seed=seed,
                workers=2,
            )
        )
        made.append(target)
    return made[0], made[1]


def trained_and_evaluated(arrays: Path, output: Path, **recipe) -> tuple[str, float]:
    result = session.train(TrainConfig(data=str(arrays), output=str(output), **recipe))
    report = evaluate(
        EvaluateConfig(
            model_dir=str(output), data=str(arrays), output=str(output.parent / f"{output.name}-e")
        )
    )
    return result.run_id, report["metrics"]["accuracy"]


def test_a_better_challenger_on_another_split_takes_the_alias_on_the_same_photos(
    two_splits, tmp_path, mlflow_store, capsys
):
    """The first day: a weak model holds @candidate; a better one, tested on other photos
    at another size, takes it once the holder is scored again on those photos."""
    first, second = two_splits
    weak, _ = trained_and_evaluated(first, tmp_path / "weak", dry_run=True)
    register_if_accurate(RegisterConfig(mlflow_run_id=weak, min_accuracy=0.0))
    strong, accuracy = trained_and_evaluated(second, tmp_path / "strong", epochs=6)
    register.main(["--mlflow-run-id", strong, "--min-accuracy", "0", "--data", str(second)])
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"registered {NAME} version 2 as @candidate"), line
    count = len(list((second / TEST_PHOTOS_DIR).iterdir()))
    assert f"on the same {count} test photos (sha256 " in line
    assert "version 1 scored again on them" in line
    client = MlflowClient(mlflow_store)
    assert str(client.get_model_version_by_alias(NAME, "candidate").version) == "2"
    tags = client.get_model_version(NAME, "2").tags
    assert tags["challenge.outcome"] == "won" and tags["challenge.rescored"] == "true"
    holder = float(tags["challenge.test_accuracy"])
    assert holder < accuracy
    recorded = client.get_run(strong).data.metrics["challenge_holder_test_accuracy"]
    assert recorded == pytest.approx(holder, abs=1e-4)


def test_the_holder_scored_again_answers_as_predict_does_on_those_photos(
    two_splits, tmp_path, mlflow_store
):
    """Decoded at the holder's own size and channels, by the function preprocess uses."""
    first, second = two_splits
    weak, _ = trained_and_evaluated(first, tmp_path / "weak", dry_run=True)
    register_if_accurate(RegisterConfig(mlflow_run_id=weak, min_accuracy=0.0))
    photos = json.loads((second / "meta.json").read_text())["photos_sha256"]["test"]
    rescored = score_holder(f"models:/{NAME}/1", second, photos)
    files = sorted((second / TEST_PHOTOS_DIR).iterdir())
    predicted = predict_files(f"models:/{NAME}/1", files).classified
    _, labels = load_split(second, "test")
    right = sum(
        (answer == "dog") == bool(label)
        for (_, answer, _), label in zip(predicted, labels, strict=True)
    )
    assert rescored.count == len(files) and rescored.accuracy == pytest.approx(right / len(files))


def test_photos_changed_after_preprocess_leave_the_models_not_comparable(
    two_splits, tmp_path, mlflow_store, capsys
):
    first, second = two_splits
    tampered = tmp_path / "tampered"
    shutil.copytree(second, tampered)
    weak, _ = trained_and_evaluated(first, tmp_path / "weak", dry_run=True)
    register_if_accurate(RegisterConfig(mlflow_run_id=weak, min_accuracy=0.0))
    strong, _ = trained_and_evaluated(tampered, tmp_path / "strong", dry_run=True)
    photo = tampered / TEST_PHOTOS_DIR / "00000"
    photo.write_bytes((tampered / TEST_PHOTOS_DIR / "00001").read_bytes())
    decision = register_if_accurate(
        RegisterConfig(mlflow_run_id=strong, min_accuracy=0.0, data=str(tampered))
    )
    assert not decision.took_alias
    assert "could not be scored again" in decision.reason and "--force-alias" in decision.reason
    assert "to be the ones the training recorded" in decision.reason


def test_without_the_test_photos_the_line_says_so_and_names_force_alias(
    two_splits, tmp_path, mlflow_store
):
    first, second = two_splits
    weak, _ = trained_and_evaluated(first, tmp_path / "weak", dry_run=True)
    register_if_accurate(RegisterConfig(mlflow_run_id=weak, min_accuracy=0.0))
    strong, _ = trained_and_evaluated(second, tmp_path / "strong", dry_run=True)
    decision = register_if_accurate(RegisterConfig(mlflow_run_id=strong, min_accuracy=0.0))
    assert not decision.took_alias
    assert "no test photos to score it again on (--data)" in decision.reason
    assert "--force-alias" in decision.reason


def refusing_to_decode_or_load(monkeypatch) -> list[Path]:
    """The files ``score_holder`` decodes; loading the holder fails the test."""
    from components.registration import rescore
    from components.scoring import loading

    decoded: list[Path] = []

    def never_loaded(*args, **kwargs):
        raise AssertionError("the holder was loaded before the photos were checked")

    monkeypatch.setattr(loading, "load_scorer", never_loaded)
    monkeypatch.setattr(rescore, "decoded", lambda data, file, *_: decoded.append(file))
    return decoded


def test_kept_photos_that_are_one_file_linked_many_times_are_refused_before_decoding(
    two_splits, tmp_path, monkeypatch
):
    """Hard links to one large photo, its digest recomputed to match: nothing is decoded
    and no photo is held whole (each is hashed a block at a time)."""
    from components.data.arrays import photos_sha256

    data = tmp_path / "arrays"
    shutil.copytree(two_splits[0], data)
    kept = sorted((data / TEST_PHOTOS_DIR).iterdir())
    big = tmp_path / "big.jpg"
    with big.open("wb") as handle:
        handle.truncate(32 * 2**20)  # 32 MiB, under a photo's bound
    for file in kept:
        file.unlink()
        file.hardlink_to(big)
    _, labels = load_split(data, "test")
    forged = photos_sha256(
        (hashlib.sha256(big.read_bytes()).hexdigest(), int(label)) for label in labels
    )
    decoded = refusing_to_decode_or_load(monkeypatch)
    with pytest.raises(ValueError, match=f"found {len(kept) - 1} more copies of photos"):
        score_holder("models:/never/1", data, forged)
    assert decoded == []


def test_kept_photos_other_than_recorded_are_refused_before_one_is_decoded(
    two_splits, tmp_path, monkeypatch
):
    from components.data.kept_photos import replace_with_kept_photos

    data = tmp_path / "arrays"
    shutil.copytree(two_splits[0], data)
    images, labels = load_split(data, "test")
    recorded = replace_with_kept_photos(data, images, labels)
    kept = sorted((data / TEST_PHOTOS_DIR).iterdir())
    kept[-1].write_bytes(kept[0].read_bytes())  # the last photo swapped for the first
    decoded = refusing_to_decode_or_load(monkeypatch)
    with pytest.raises(ValueError, match="to be the ones the training recorded"):
        score_holder("models:/never/1", data, recorded)
    assert decoded == []
