"""The search on this machine, through a real tracking server (PostgreSQL, SeaweedFS)."""

import pytest
from mlflow.tracking import MlflowClient

from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from components.tracking.tags import BEST_TAG, PARENT_TAG, SEARCH_TAG, STOPPED_EARLY_TAG
from components.training.config import TrainConfig
from components.tuning import local
from components.tuning.config import TuneConfig
from components.tuning.search_space import DOUBLE, Dimension

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture(scope="module")
def wide_val_arrays(sample_images, tmp_path_factory):
    """The sample with 30% held out for validation: 600 photos, so that the median rule
    compares trials, not the noise of a small validation split."""
    target = tmp_path_factory.mktemp("tune") / "arrays"
    build_arrays(
        PreprocessConfig(
            input=str(sample_images), output=str(target), image_size=32, val_fraction=0.3
        )
    )
    return target


def test_a_hopeless_trial_is_stopped_early_and_the_search_is_recorded(
    tracking_server, wide_val_arrays, tmp_path
):
    """Two trials that learn, then one at a learning rate of 1e-6, which cannot: the median
    pruner stops it at epoch 2 of 3, the others' median being far above it."""
    client = MlflowClient(tracking_server.url)
    space = (Dimension("lr", DOUBLE, 1e-6, 1e-2, log=True),)
    recipe = TrainConfig(data=str(wide_val_arrays), output=str(tmp_path / "trials"),
                         model="compact_cnn", epochs=3, schedule="onecycle")  # fmt: skip
    tune = TuneConfig(trials=3, min_trials_required=2, start_step=2)
    first = ({"lr": 0.004}, {"lr": 0.006}, {"lr": 1e-6})
    best, trials = local.search(tune, recipe, space, "tune-t", first)
    assert [trial.stopped_early for trial in trials] == [False, False, True]
    hopeless = client.get_run(trials[2].run_id)
    assert hopeless.info.status == "KILLED"
    assert hopeless.data.tags[STOPPED_EARLY_TAG] == "true"
    assert len(client.get_metric_history(trials[2].run_id, "val_accuracy")) == 2  # not 3
    assert best.run_id in {trials[0].run_id, trials[1].run_id}
    assert client.get_run(best.run_id).data.tags[BEST_TAG] == "true"
    parent_id = hopeless.data.tags[PARENT_TAG]
    parent = client.get_run(parent_id)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags[SEARCH_TAG] == "optuna"
    assert parent.data.metrics["trials_stopped_early"] == 1
    assert parent.data.params["tune_min_trials_required"] == "2"
    children = client.search_runs(
        [parent.info.experiment_id], f"tags.`{PARENT_TAG}` = '{parent_id}'"
    )
    assert {run.info.run_id for run in children} == {trial.run_id for trial in trials}
    assert {run.data.params["lr"] for run in children} == {"0.004", "0.006", "1e-06"}
