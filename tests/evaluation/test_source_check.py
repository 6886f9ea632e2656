"""Evaluate holds the test split to its source: the listing the download step recorded in
a real (SQLite) tracking store names the test photos, and a split written otherwise,
before training, is refused however consistent its own records are."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from components.core.names import TEST_PHOTOS_DIR
from components.data.arrays import load_split, photos_sha256, save_split
from components.evaluation import source_check
from components.evaluation.config import EvaluateConfig
from components.evaluation.report import evaluate
from components.tracking.source_listing import record_listing
from components.training import session
from components.training.config import TrainConfig


def listing_run(raw: Path) -> str:
    """The download step's record of ``raw``'s listing, in this test's tracking store."""
    return record_listing((raw / "listing.json").read_bytes(), "petimages-sample.zip")


def trained(arrays: Path, tmp_path: Path) -> str:
    cfg = TrainConfig(data=str(arrays), output=str(tmp_path / "m"), dry_run=True)
    return str(session.train(cfg).run_id)


def trained_and_evaluated(arrays: Path, tmp_path: Path, listing: str | None) -> dict:
    trained(arrays, tmp_path)
    return evaluated(arrays, tmp_path, listing)


def evaluated(arrays: Path, tmp_path: Path, listing: str | None) -> dict:
    return evaluate(
        EvaluateConfig(
            model_dir=str(tmp_path / "m"),
            data=str(arrays),
            output=str(tmp_path / "eval"),
            source_listing=listing,
        )
    )


def test_the_source_test_share_is_scored_and_the_check_recorded(
    sample_images, sample_arrays, tmp_path, mlflow_store
):
    listing = listing_run(sample_images)
    report = trained_and_evaluated(sample_arrays, tmp_path, listing)
    digest = hashlib.sha256((sample_images / "listing.json").read_bytes()).hexdigest()
    assert report["source_listing"] == {"run": listing, "sha256": digest, "test_fraction": 0.1}
    assert report["count"] == 202


def cherry_picked(source: Path, target: Path, dropped: int) -> Path:
    """The arrays with their test split's last ``dropped`` photos taken out everywhere,
    as preprocess would have written such a split: shards, kept photos, counts, digest."""
    shutil.copytree(source, target)
    images, labels = load_split(target, "test")
    keep = len(labels) - dropped
    meta = json.loads((target / "meta.json").read_text())
    meta["shards"]["test"] = save_split(target, "test", images[:keep], labels[:keep])
    meta["counts"]["test"] = {
        name: int((labels[:keep] == label).sum()) for label, name in enumerate(meta["classes"])
    }
    kept = sorted((target / TEST_PHOTOS_DIR).iterdir())
    for photo in kept[keep:]:
        photo.unlink()
    digests = [hashlib.sha256(photo.read_bytes()).hexdigest() for photo in kept[:keep]]
    meta["photos_sha256"]["test"] = photos_sha256(zip(digests, labels[:keep].tolist(), strict=True))
    (target / "meta.json").write_text(json.dumps(meta))
    return target


def test_a_test_split_cherry_picked_before_training_is_refused_naming_a_missing_photo(
    sample_images, sample_arrays, tmp_path, mlflow_store
):
    """Written before training, the training records the cherry-picked split as its own;
    the source's listing still names the photos it lacks."""
    arrays = cherry_picked(sample_arrays, tmp_path / "arrays", dropped=30)
    with pytest.raises(ValueError, match=r"found 30 of its 202 missing, such as 'PetImages/"):
        trained_and_evaluated(arrays, tmp_path, listing_run(sample_images))
    assert not (tmp_path / "eval").exists()


def test_a_listing_other_than_the_one_the_training_recorded_is_refused(
    sample_images, sample_arrays, tmp_path, mlflow_store
):
    arrays = tmp_path / "arrays"
    shutil.copytree(sample_arrays, arrays)
    meta = json.loads((arrays / "meta.json").read_text())
    meta["source"]["listing_run"] = listing_run(sample_images)  # as the download recorded
    (arrays / "meta.json").write_text(json.dumps(meta))
    run_id = trained(arrays, tmp_path)
    params = MlflowClient(mlflow_store).get_run(run_id).data.params
    assert params["data_source_listing"] == meta["source"]["listing_run"]
    assert params["data_test_fraction"] == "0.1"
    other = record_listing(b'{"a.jpg": ["' + b"0" * 64 + b'", 1]}', "other.zip")
    with pytest.raises(ValueError, match=f"recorded {other}, another listing; evaluate"):
        evaluated(arrays, tmp_path, other)
    assert (
        evaluated(arrays, tmp_path, None)["source_listing"]["run"] == params["data_source_listing"]
    )


def test_the_listing_given_must_be_the_one_the_training_recorded(sample_images, mlflow_store):
    """The pipeline gives the download task's run; the training run's record is the
    fallback (a sweep's evaluate, ``python -m components.evaluate``). Another download of
    the same source (a search's staging Job) records the same listing in another run."""
    first, again = listing_run(sample_images), listing_run(sample_images)
    other = record_listing(b'{"a.jpg": ["' + b"0" * 64 + b'", 1]}', "other.zip")
    digest = hashlib.sha256((sample_images / "listing.json").read_bytes()).hexdigest()
    recorded = {"data_source_listing": first, "data_source_listing_sha256": digest}
    assert source_check.listing_run(first, recorded, "r") == first
    assert source_check.listing_run(None, recorded, "r") == first
    assert source_check.listing_run(again, recorded, "r") == again
    assert source_check.listing_run(other, {}, "r") == other
    assert source_check.listing_run(None, {}, "r") is None
    with pytest.raises(ValueError, match=f"recorded the source listing of MLflow run {first}, "):
        source_check.listing_run(other, recorded, "r")
