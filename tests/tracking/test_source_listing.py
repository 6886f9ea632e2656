"""The source listing recorded in a real (SQLite) MLflow tracking store and read back:
only the bytes the download step recorded, whatever is planted beside them later."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from components.tracking.source_listing import (
    LISTING_ARTIFACT,
    record_listing,
    recorded_listing,
)
from components.tracking.tags import SOURCE_LISTING_TAG

LISTING = b'{"PetImages/Cat/1.jpg": ["' + b"a" * 64 + b'", 5]}'


def test_a_recorded_listing_reads_back_and_its_run_says_what_it_is(mlflow_store):
    run_id = record_listing(LISTING, "https://example.com/photos.zip")
    assert recorded_listing(run_id, 10_000) == LISTING
    run = MlflowClient(mlflow_store).get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "download"
    assert run.data.tags["data.source"] == "https://example.com/photos.zip"
    assert len(run.data.tags[SOURCE_LISTING_TAG]) == 64


def test_a_listing_changed_in_the_artifact_store_or_too_large_is_refused(mlflow_store, tmp_path):
    run_id = record_listing(LISTING, "photos.zip")
    with pytest.raises(ValueError, match="at most 10 bytes"):
        recorded_listing(run_id, 10)
    planted = tmp_path / "listing.json"
    planted.write_bytes(LISTING.replace(b"a", b"b"))
    MlflowClient(mlflow_store).log_artifact(run_id, str(planted), "source")
    with pytest.raises(ValueError, match="the one the download step recorded .* other bytes"):
        recorded_listing(run_id, 10_000)


def test_a_run_without_a_listing_or_no_run_at_all_is_named(mlflow_store):
    client = MlflowClient(mlflow_store)
    run_id = client.create_run(client.create_experiment("other")).info.run_id
    with pytest.raises(LookupError, match=f"{LISTING_ARTIFACT} .* of MLflow run {run_id}"):
        recorded_listing(run_id, 10_000)
    with pytest.raises(LookupError, match="expected MLflow run 0+, which records the source "):
        recorded_listing("0" * 32, 10_000)  # a download recorded in another store


def test_under_kfp_tracking_the_listing_goes_into_the_tasks_own_run(mlflow_store, monkeypatch):
    """KFP >= 2.17 makes a run per task and ends it itself: the listing goes there, and the
    run is left as KFP made it."""
    client = MlflowClient(mlflow_store)
    experiment = client.create_experiment("kfp")
    task_run = client.create_run(experiment).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", task_run)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment)
    assert record_listing(LISTING, "photos.zip") == task_run
    assert client.get_run(task_run).info.status == "RUNNING"
    assert recorded_listing(task_run, 10_000) == LISTING
