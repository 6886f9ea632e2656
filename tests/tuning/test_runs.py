"""A search's runs in MLflow: the best finished trial marked, stopped ones ended KILLED."""

import pytest
from mlflow.tracking import MlflowClient

from components.core import tracking
from components.core.search_space import SEARCH_SPACE
from components.tuning import runs
from components.tuning.config import TuneConfig


def child(parent: str, accuracies: list[float]) -> str:
    """A trial's run as the train step leaves it: nested, with its per-epoch accuracy."""
    run_id = tracking.create_run("dogs-vs-cats", "trial", {tracking.PARENT_TAG: parent})
    client = MlflowClient(tracking.tracking_uri())
    for epoch, accuracy in enumerate(accuracies, 1):
        client.log_metric(run_id, "val_accuracy", accuracy, step=epoch)
    return run_id


def test_the_best_is_the_finished_trial_with_the_best_last_epoch(mlflow_store):
    parent = runs.start_parent("dogs-vs-cats", "t", TuneConfig(), SEARCH_SPACE, {})
    peaked = child(parent, [0.80, 0.70])  # best epoch 0.80, last 0.70: its model is the last
    steady = child(parent, [0.60, 0.75])
    stopped = child(parent, [0.90])  # stopped early: it wrote no model
    trials = [runs.Trial("a", peaked, False), runs.Trial("b", steady, False),
              runs.Trial("c", stopped, True)]  # fmt: skip
    assert runs.finish_search(parent, trials).run_id == steady
    client = MlflowClient(tracking.tracking_uri())
    assert client.get_run(stopped).info.status == "KILLED"
    assert client.get_run(steady).data.tags[tracking.TUNE_BEST_TAG] == "true"
    ended = client.get_run(parent)
    assert ended.info.status == "FINISHED"
    assert ended.data.metrics == {"best_val_accuracy": 0.75, "trials_finished": 2.0,
                                  "trials_stopped_early": 1.0}  # fmt: skip
    assert ended.data.params["tune_algorithm"] == "tpe"


def test_a_search_where_every_trial_stopped_early_has_no_best(mlflow_store):
    parent = runs.start_parent("dogs-vs-cats", "t", TuneConfig(), SEARCH_SPACE, {})
    stopped = child(parent, [0.5])
    with pytest.raises(ValueError, match="expected at least one finished trial"):
        runs.finish_search(parent, [runs.Trial("a", stopped, True)])
