"""A sweep's MLflow runs: the parent holding the grid, the best child chosen on validation."""

from __future__ import annotations

import json

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from pipeline.sweep import BEST_TAG
from pipeline.sweep_runs import GRID_FILE, mark_best, start_parent


def child(client: MlflowClient, experiment_id: str, val: float, test: float) -> str:
    run = client.create_run(experiment_id)
    client.log_metric(run.info.run_id, "val_accuracy", val)
    client.log_metric(run.info.run_id, "test_accuracy", test)
    return run.info.run_id


def test_the_best_child_is_chosen_on_validation_never_on_test(mlflow_store):
    grid = [json.dumps({"lr": 0.1}), json.dumps({"lr": 0.01})]
    parent = start_parent("sweeps", grid, "kfp-1", "dogs-vs-cats-sweep")
    client = MlflowClient(mlflow_store)
    held = client.get_run(parent)
    logged = mlflow.artifacts.load_dict(f"runs:/{parent}/{GRID_FILE}")
    assert logged == {"combinations": [json.loads(c) for c in grid]}  # whole, however long
    assert held.data.params["sweep_size"] == "2" and held.data.params["sweep_axes"] == "lr"
    assert held.data.tags["kfp.run_id"] == "kfp-1"
    experiment = held.info.experiment_id
    better_on_val = child(client, experiment, val=0.90, test=0.70)
    better_on_test = child(client, experiment, val=0.80, test=0.99)
    best = mark_best(parent, [better_on_test, better_on_val])
    assert (best.run_id, best.val_accuracy, best.test_accuracy) == (better_on_val, 0.9, 0.7)
    assert client.get_run(better_on_val).data.tags[BEST_TAG] == "true"
    assert BEST_TAG not in client.get_run(better_on_test).data.tags
    ended = client.get_run(parent)
    assert ended.info.status == "FINISHED"
    assert ended.data.tags["sweep.best_run_id"] == better_on_val
    assert ended.data.metrics["best_test_accuracy"] == 0.7


def test_a_tie_is_broken_the_same_way_every_time_and_no_child_is_an_error(mlflow_store):
    parent = start_parent("sweeps", ['{"lr": 0.1}'], "kfp-2", "dogs-vs-cats-sweep")
    experiment = MlflowClient(mlflow_store).get_run(parent).info.experiment_id
    client = MlflowClient(mlflow_store)
    twins = sorted(child(client, experiment, val=0.8, test=0.8) for _ in range(2))
    assert mark_best(parent, twins).run_id == twins[-1]
    with pytest.raises(ValueError, match="expected at least one child run, found none"):
        mark_best(parent, [])
