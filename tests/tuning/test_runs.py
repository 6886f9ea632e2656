"""Every search in MLflow, whatever ran its trials: parents, children, the best chosen on
validation."""

from __future__ import annotations

import json

import mlflow
import pytest
from mlflow.tracking import MlflowClient

from components.tracking import run_log, store
from components.tracking.tags import (
    BEST_TAG,
    COMBINATION_TAG,
    KATIB_SEARCH,
    OPTUNA_SEARCH,
    PARENT_TAG,
    SEARCH_TAG,
)
from components.tuning import runs
from components.tuning.config import TuneConfig
from components.tuning.runs import GRID_FILE, close_search, grid_trials, open_grid
from components.tuning.search_space import SEARCH_SPACE


def child(parent: str, accuracies: list[float]) -> str:
    """A trial's run as the train step leaves it: nested, with its per-epoch accuracy."""
    run_id = run_log.create_run("dogs-vs-cats", "trial", {PARENT_TAG: parent})
    client = MlflowClient(store.tracking_uri())
    for epoch, accuracy in enumerate(accuracies, 1):
        client.log_metric(run_id, "val_accuracy", accuracy, step=epoch)
    return run_id


@pytest.mark.parametrize("kind", [KATIB_SEARCH, OPTUNA_SEARCH])
def test_the_best_is_the_finished_trial_with_the_best_last_epoch(kind, mlflow_store):
    parent = runs.open_space_search("dogs-vs-cats", kind, "t", TuneConfig(), SEARCH_SPACE, {})
    peaked = child(parent, [0.80, 0.70])  # best epoch 0.80, last 0.70: its model is the last
    steady = child(parent, [0.60, 0.75])
    stopped = child(parent, [0.90])  # stopped early: it wrote no model
    trials = [runs.Trial("a", peaked, False), runs.Trial("b", steady, False),
              runs.Trial("c", stopped, True)]  # fmt: skip
    best = runs.close_search(parent, trials)
    assert (best.name, best.run_id, best.val_accuracy) == ("b", steady, 0.75)
    client = MlflowClient(store.tracking_uri())
    assert client.get_run(stopped).info.status == "KILLED"
    assert client.get_run(steady).data.tags[BEST_TAG] == "true"
    ended = client.get_run(parent)
    assert ended.info.status == "FINISHED" and ended.data.tags[SEARCH_TAG] == kind
    assert ended.data.tags["search.best_trial"] == "b"
    assert ended.info.run_name == "search t"
    assert ended.data.metrics == {"best_val_accuracy": 0.75, "trials_finished": 2.0,
                                  "trials_stopped_early": 1.0}  # fmt: skip
    assert ended.data.params["tune_algorithm"] == "tpe"


def test_a_search_where_every_trial_stopped_early_has_no_best(mlflow_store):
    parent = runs.open_space_search(
        "dogs-vs-cats", OPTUNA_SEARCH, "t", TuneConfig(), SEARCH_SPACE, {}
    )
    stopped = child(parent, [0.5])
    with pytest.raises(ValueError, match="expected at least one finished trial, found 1 stopped"):
        runs.close_search(parent, [runs.Trial("a", stopped, True)])


def sweep_child(client: MlflowClient, experiment_id: str, val: float, test: float) -> str:
    run = client.create_run(experiment_id, tags={COMBINATION_TAG: f'{{"lr": {val}}}'})
    client.log_metric(run.info.run_id, "val_accuracy", val)
    client.log_metric(run.info.run_id, "test_accuracy", test)
    return run.info.run_id


def test_the_best_child_is_chosen_on_validation_never_on_test(mlflow_store):
    grid = [json.dumps({"lr": 0.1}), json.dumps({"lr": 0.01})]
    parent = open_grid("sweeps", grid, "kfp-1", "dogs-vs-cats-sweep")
    client = MlflowClient(mlflow_store)
    held = client.get_run(parent)
    logged = mlflow.artifacts.load_dict(f"runs:/{parent}/{GRID_FILE}")
    assert logged == {"combinations": [json.loads(c) for c in grid]}  # whole, however long
    assert held.data.params["sweep_size"] == "2" and held.data.params["sweep_axes"] == "lr"
    assert held.data.tags["kfp.run_id"] == "kfp-1" and held.data.tags[SEARCH_TAG] == "grid"
    assert held.info.run_name == "sweep lr (2 runs)"
    experiment = held.info.experiment_id
    better_on_val = sweep_child(client, experiment, val=0.90, test=0.70)
    better_on_test = sweep_child(client, experiment, val=0.80, test=0.99)
    best = close_search(parent, grid_trials([better_on_test, better_on_val]))
    assert (best.run_id, best.val_accuracy, best.test_accuracy) == (better_on_val, 0.9, 0.7)
    assert best.name == '{"lr": 0.9}' and better_on_test in best.compare_url
    assert client.get_run(better_on_val).data.tags[BEST_TAG] == "true"
    assert BEST_TAG not in client.get_run(better_on_test).data.tags
    ended = client.get_run(parent)
    assert ended.info.status == "FINISHED"
    assert ended.data.tags["search.best_run_id"] == better_on_val
    assert ended.data.metrics["best_test_accuracy"] == 0.7


def test_a_tie_is_broken_the_same_way_every_time_and_no_child_is_an_error(mlflow_store):
    parent = open_grid("sweeps", ['{"lr": 0.1}'], "kfp-2", "dogs-vs-cats-sweep")
    experiment = MlflowClient(mlflow_store).get_run(parent).info.experiment_id
    client = MlflowClient(mlflow_store)
    twins = sorted(sweep_child(client, experiment, val=0.8, test=0.8) for _ in range(2))
    assert close_search(parent, grid_trials(twins)).run_id == twins[-1]
    with pytest.raises(ValueError, match="expected at least one trial, found none"):
        close_search(parent, [])
