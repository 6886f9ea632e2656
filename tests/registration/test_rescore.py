"""Champion and challenger on the same photos, photos neither trained on: the alias's
holder, tested on another split (and at another size), is scored again by the gate on the
challenger's test photos that are in its own test share too."""

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
from components.data.test_share import in_test_share
from components.evaluation.config import EvaluateConfig
from components.evaluation.predictions import predict_files
from components.evaluation.report import evaluate
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate
from components.registration.rescore import score_holder
from components.tracking.source_listing import record_listing
from components.training import session
from components.training.config import TrainConfig

NAME = "dogs-vs-cats"


@pytest.fixture(scope="module")
def two_splits(sample_images, tmp_path_factory) -> tuple[Path, Path]:
    """The sample preprocessed twice: grey 40×40 with a test fraction of 0.1 and seed 0,
    and RGB 48×48 with 0.2 and seed 1 (twice the test photos, at another size and channel
    count; the first's test photos among them)."""
    folder = tmp_path_factory.mktemp("two-splits")
    made = []
    for name, size, channels, fraction, seed in (
        ("first", 40, 1, 0.1, 0),
        ("second", 48, 3, 0.2, 1),
    ):
        target = folder / name
        build_arrays(
            PreprocessConfig(
                input=str(sample_images),
                output=str(target),
                image_size=size,
                channels=channels,
                test_fraction=fraction,
                split_seed=seed,
                workers=2,
            )
        )
        made.append(target)
    return made[0], made[1]


def trained_and_evaluated(
    arrays: Path, output: Path, listing: str | None = None, **recipe
) -> tuple[str, float]:
    """A model trained on ``arrays`` and evaluated, its test split checked against the
    source ``listing`` (a download step's MLflow run) where one is given."""
    result = session.train(TrainConfig(data=str(arrays), output=str(output), **recipe))
    report = evaluate(
        EvaluateConfig(
            model_dir=str(output),
            data=str(arrays),
            output=str(output.parent / f"{output.name}-e"),
            source_listing=listing,
        )
    )
    return result.run_id, report["metrics"]["accuracy"]


@pytest.fixture
def listing(sample_images, mlflow_store) -> str:
    """The sample's listing, as the download step records it in this test's store."""
    return record_listing((sample_images / "listing.json").read_bytes(), "sample.zip")


def in_share(arrays: Path, fraction: float) -> list[int]:
    """The positions of the kept test photos below ``fraction``."""
    kept = sorted((arrays / TEST_PHOTOS_DIR).iterdir())
    digests = [hashlib.sha256(photo.read_bytes()).hexdigest() for photo in kept]
    return [i for i, digest in enumerate(digests) if in_test_share(digest, fraction)]


def test_a_better_challenger_on_another_split_takes_the_alias_on_photos_neither_trained_on(
    two_splits, tmp_path, mlflow_store, capsys, listing
):
    """The first day: a weak model holds @candidate; a better one, tested on more photos
    at another size, takes it once the holder is scored again on those of them in its
    own test share: the holder trained on the others."""
    first, second = two_splits
    weak, _ = trained_and_evaluated(first, tmp_path / "weak", listing, dry_run=True)
    register_if_accurate(RegisterConfig(mlflow_run_id=weak, min_accuracy=0.0))
    strong, _ = trained_and_evaluated(second, tmp_path / "strong", listing, epochs=6)
    register.main(["--mlflow-run-id", strong, "--min-accuracy", "0", "--data", str(second)])
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"registered {NAME} version 2 as @candidate"), line
    shared = in_share(second, 0.1)
    assert 0 < len(shared) < len(list((second / TEST_PHOTOS_DIR).iterdir())) * 0.7
    assert f"on the same {len(shared)} test photos (of test photos sha256 " in line
    assert "which neither trained on, version 1 scored again on them" in line
    client = MlflowClient(mlflow_store)
    assert str(client.get_model_version_by_alias(NAME, "candidate").version) == "2"
    tags = client.get_model_version(NAME, "2").tags
    assert tags["challenge.outcome"] == "won" and tags["challenge.rescored"] == "true"
    assert tags["challenge.photos"] == str(len(shared)) and tags["data.test-share"] == "0.2"
    holder = float(tags["challenge.test_accuracy"])
    recorded = client.get_run(strong).data.metrics["challenge_holder_test_accuracy"]
    assert recorded == pytest.approx(holder, abs=1e-4)


def challenged(two_splits, tmp_path, holder_listing, listing, data=True, tamper=False):
    """A dry-run holder of the first split registered with @candidate, then a dry-run
    challenger of the second (each evaluated against ``…listing`` where one is given),
    its test photos tampered with after training where asked: the gate's decision."""
    first, second = two_splits
    if tamper:
        shutil.copytree(second, tmp_path / "tampered")
        second = tmp_path / "tampered"
    weak, _ = trained_and_evaluated(first, tmp_path / "weak", holder_listing, dry_run=True)
    register_if_accurate(RegisterConfig(mlflow_run_id=weak, min_accuracy=0.0))
    strong, _ = trained_and_evaluated(second, tmp_path / "strong", listing, dry_run=True)
    if tamper:
        kept = second / TEST_PHOTOS_DIR
        (kept / "00000").write_bytes((kept / "00001").read_bytes())
    return register_if_accurate(
        RegisterConfig(mlflow_run_id=strong, min_accuracy=0.0, data=str(second) if data else None)
    )


def test_a_holder_whose_split_was_not_checked_against_its_source_is_not_compared(
    two_splits, tmp_path, mlflow_store, listing
):
    """Which photos it trained on is not known: scored again on the challenger's photos,
    it might be graded on its own training photos."""
    decision = challenged(two_splits, tmp_path, None, listing)
    assert not decision.took_alias
    assert "version 1's test split was not checked against a source listing" in decision.reason


def test_a_challenger_whose_split_was_not_checked_against_its_source_is_not_compared(
    two_splits, tmp_path, mlflow_store, listing
):
    decision = challenged(two_splits, tmp_path, listing, None)
    assert not decision.took_alias and "--force-alias" in decision.reason
    assert "this model's test split was not checked against the source listing" in decision.reason


def test_the_holder_scored_again_answers_as_predict_does_on_those_photos(
    two_splits, tmp_path, mlflow_store
):
    """Decoded at the holder's own size and channels, by the function preprocess uses,
    only the photos in its test share."""
    first, second = two_splits
    weak, _ = trained_and_evaluated(first, tmp_path / "weak", dry_run=True)
    register_if_accurate(RegisterConfig(mlflow_run_id=weak, min_accuracy=0.0))
    photos = json.loads((second / "meta.json").read_text())["photos_sha256"]["test"]
    rescored = score_holder(f"models:/{NAME}/1", second, photos, share=0.1)
    shared = in_share(second, 0.1)
    files = [sorted((second / TEST_PHOTOS_DIR).iterdir())[i] for i in shared]
    predicted = predict_files(f"models:/{NAME}/1", files).classified
    labels = load_split(second, "test")[1][shared]
    right = sum(
        (answer == "dog") == bool(label)
        for (_, answer, _), label in zip(predicted, labels, strict=True)
    )
    assert rescored.positions == tuple(shared)
    assert rescored.count == len(files) and rescored.accuracy == pytest.approx(right / len(files))


def test_photos_changed_after_preprocess_leave_the_models_not_comparable(
    two_splits, tmp_path, mlflow_store, listing
):
    decision = challenged(two_splits, tmp_path, listing, listing, tamper=True)
    assert not decision.took_alias
    assert "could not be scored again" in decision.reason and "--force-alias" in decision.reason
    assert "to be the ones the training recorded" in decision.reason


def test_without_the_test_photos_the_line_says_so_and_names_force_alias(
    two_splits, tmp_path, mlflow_store, listing
):
    decision = challenged(two_splits, tmp_path, listing, listing, data=False)
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
