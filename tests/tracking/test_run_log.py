"""A step's MLflow run, in a SQLite store: started, ended as it went, found and read back."""

from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient

from components.tracking import run_log


def test_a_run_that_raises_ends_failed_and_one_that_returns_finished(mlflow_store):
    with run_log.start_run("runs", run_name="good", tags={"kind": "good"}) as good:
        run_log.log_params({"lr": 0.01})
    with pytest.raises(RuntimeError), run_log.start_run("runs", run_name="bad") as bad:
        raise RuntimeError("the epoch failed")
    client = MlflowClient(mlflow_store)
    assert client.get_run(good).info.status == "FINISHED"
    assert client.get_run(bad).info.status == "FAILED"
    assert run_log.run_params(good) == {"lr": "0.01"} and run_log.run_tag(good, "kind") == "good"


def test_the_newest_run_carrying_every_tag_is_found(mlflow_store):
    older = run_log.create_run("runs", "older", {"kfp.run_id": "k-1", "combination": "a"})
    newer = run_log.create_run("runs", "newer", {"kfp.run_id": "k-1", "combination": "a"})
    run_log.create_run("runs", "other", {"kfp.run_id": "k-1", "combination": "b"})
    found = run_log.find_run_by_tags("runs", {"kfp.run_id": "k-1", "combination": "a"})
    assert found == newer != older
    assert run_log.find_run_by_tags("runs", {"kfp.run_id": "k-2"}) is None


def test_a_run_left_to_its_owner_stays_open_and_the_best_of_equals_is_stable(mlflow_store):
    first = run_log.create_run("runs", "first", {})
    second = run_log.create_run("runs", "second", {})
    run_log.finish_run(first, {"val_accuracy": 0.9}, {"best": "maybe"}, status=None)
    run_log.finish_run(second, {"val_accuracy": 0.9}, {})
    client = MlflowClient(mlflow_store)
    assert client.get_run(first).info.status == "RUNNING"  # KFP ends the runs it made
    assert client.get_run(second).info.status == "FINISHED"
    assert run_log.best_run([first, second], "val_accuracy") == (max(first, second), 0.9)


def test_a_json_artifact_is_read_back_and_a_missing_one_is_none(mlflow_store):
    run_id = run_log.create_run("runs", "with-json", {})
    run_log.log_json_into(run_id, {"grid": [1, 2]}, "sweep/grid.json")
    assert json.loads(run_log.load_run_bytes(run_id, "sweep/grid.json", 100) or b"") == {
        "grid": [1, 2]
    }
    assert run_log.load_run_bytes(run_id, "sweep/missing.json", 100) is None
    with pytest.raises(ValueError, match="at most 10 bytes, found 32 bytes; not downloaded"):
        run_log.load_run_bytes(run_id, "sweep/grid.json", 10)
    assert run_log.run_identity("0" * 32) is None
