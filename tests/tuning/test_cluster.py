"""A search on the cluster's Katib, end to end against a stand-in Katib API.

No Kubernetes API server or Katib controller runs here: ``tests/support/katib_api.py`` stands in
for both, and each trial is the train step itself, started with the very command and
flags of the trial's Job (the Experiment's template with Katib's substitutions), so the
trials' MLflow runs, outputs and metrics are real.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kubernetes.client import ApiClient, Configuration
from mlflow.tracking import MlflowClient

from components.tracking import run_log, store
from components.tracking.tags import BEST_TAG, PARENT_TAG, SEARCH_TAG, STOPPED_EARLY_TAG, TRIAL_TAG
from components.training.config import TrainConfig
from components.tuning.cluster import tune_on_cluster
from components.tuning.config import TuneConfig
from components.tuning.experiment import ExperimentTarget
from components.tuning.report import ADDITIONAL, OBJECTIVE
from components.tuning.search_space import searched
from tests.support.katib_api import FakeKatibApi
from tests.support.katib_collector import parse
from tests.support.processes import HANG_SECONDS

pytestmark = [pytest.mark.slow, pytest.mark.integration]
METRICS = [OBJECTIVE, *ADDITIONAL]
SPACE = searched(
    {"label_smoothing": 0, "min_crop_area": 1, "weight_decay": 0}, "bn_cnn"
)  # lr, batch
TRIALS = {"tune-a-1": {"lr": "0.01", "batch_size": "64"},
          "tune-a-2": {"lr": "0.003", "batch_size": "128"},
          "tune-a-3": {"lr": "0.001", "batch_size": "256"}}  # fmt: skip


def run_trial(experiment: dict, name: str, values: dict, cwd: Path) -> None:
    """What Katib's trial Job runs: the template's command, placeholders substituted. Its
    stdout and stderr together, as Katib's StdOut collector reads the container's log
    (``tests/support/katib_collector.py``), give each epoch's values once, the history's,
    and nothing else."""
    text = json.dumps(experiment["spec"]["trialTemplate"]["trialSpec"])
    for key, value in {"trialName": name, **values}.items():
        text = text.replace(f"${{trialParameters.{key}}}", value)
    container = json.loads(text)["spec"]["template"]["spec"]["containers"][0]
    command = [sys.executable, *container["command"][1:], *container["args"], "--device=cpu"]
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=HANG_SECONDS, env=os.environ, cwd=cwd
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (output,) = [arg.removeprefix("--output=") for arg in command if arg.startswith("--output=")]
    history = json.loads((cwd / output / "history.json").read_text())
    observations = parse(done.stdout + done.stderr, METRICS)
    expected = [(metric, f"{epoch[metric]:.6f}") for epoch in history for metric in METRICS]
    assert [(metric, value) for _, metric, value in observations] == expected
    assert all(stamp is not None for stamp, _, _ in observations)
    assert " INFO onnx" not in done.stderr  # the exporter's optimizer does not narrate


@pytest.fixture
def search(small_arrays, mlflow_store, tmp_path):
    shared = tmp_path / "shared"

    def play(experiment: dict) -> dict:
        for name, values in TRIALS.items():
            run_trial(experiment, name, values, tmp_path)
        return {
            "succeededTrialList": ["tune-a-1", "tune-a-2"],
            "earlyStoppedTrialList": ["tune-a-3"],
            "currentOptimalTrial": {"bestTrialName": "tune-a-1"},
        }

    target = ExperimentTarget(name="tune-a", image="img", tracking_uri=mlflow_store,
                              namespace="team-a", shared_mount=str(shared))  # fmt: skip
    recipe = TrainConfig(data=str(small_arrays), output=str(tmp_path / "best"), epochs=2,
                         kfp_run_id="run-1")  # fmt: skip
    return play, target, recipe, shared


def test_the_best_trials_model_comes_back_and_mlflow_shows_the_search(search):
    play, target, recipe, shared = search
    with FakeKatibApi(play) as api:
        best = search_with(api, target, recipe)
    (created,) = api.created
    assert created["metadata"]["name"] == "tune-a"
    assert created["metadata"]["namespace"] == "team-a"
    client = MlflowClient(store.tracking_uri())
    runs = {run_log.run_tag(r, TRIAL_TAG): r for r in _children(client, best)}
    assert set(runs) == set(TRIALS)
    assert runs["tune-a-1"] == best or runs["tune-a-2"] == best
    assert Path(recipe.output, "model.pt").is_file()
    assert Path(recipe.output, "mlflow_run_id").read_text() == best
    stopped = client.get_run(runs["tune-a-3"])
    assert stopped.info.status == "KILLED" and stopped.data.tags[STOPPED_EARLY_TAG] == "true"
    assert client.get_run(best).data.tags[BEST_TAG] == "true"
    parent = client.get_run(client.get_run(best).data.tags[PARENT_TAG])
    assert parent.info.status == "FINISHED" and parent.data.tags["search.best_run_id"] == best
    assert parent.data.tags[SEARCH_TAG] == "katib"
    assert parent.data.params["tune_trials"] == "3"
    assert parent.data.tags["katib.optimal_trial"] == "tune-a-1"  # Katib's status, read
    for run in runs.values():  # per-epoch metrics, as the compare view plots them
        assert len(client.get_metric_history(run, "val_accuracy")) == 2
        assert (
            client.get_run(run).data.params["lr"] == TRIALS[run_log.run_tag(run, TRIAL_TAG)]["lr"]
        )
    assert not (shared / "tune-a").exists()  # the staged arrays and trial outputs are removed


def test_a_failed_experiment_ends_the_task_with_katibs_reason(search):
    play, target, recipe, shared = search
    with FakeKatibApi(lambda experiment: {}, failed=True) as api:
        with pytest.raises(RuntimeError, match="ExperimentMaxFailedTrialsReached: 3 trials failed"):
            search_with(api, target, recipe)
    assert not (shared / "tune-a").exists()


def test_an_experiment_the_webhook_refuses_says_why(search):
    play, target, recipe, shared = search
    with FakeKatibApi(play) as api:
        api.refuse_creation = "spec.parallelTrialCount: should be <= spec.maxTrialCount"
        with pytest.raises(RuntimeError, match="Katib refused Experiment tune-a in team-a: 400"):
            search_with(api, target, recipe)
    assert not (shared / "tune-a").exists()


def search_with(api: FakeKatibApi, target: ExperimentTarget, recipe: TrainConfig) -> str:
    client = ApiClient(Configuration(host=api.url))
    return tune_on_cluster(
        TuneConfig(trials=3), recipe, target, SPACE, client, poll_seconds=0.05, timeout_seconds=600
    )


def _children(client: MlflowClient, run_id: str) -> list[str]:
    run = client.get_run(run_id)
    parent = run.data.tags[PARENT_TAG]
    found = client.search_runs([run.info.experiment_id], f"tags.`{PARENT_TAG}` = '{parent}'")
    return [r.info.run_id for r in found]


def test_a_trial_name_katib_could_not_have_is_refused_not_followed(search, tmp_path):
    """An API that names a trial ``../..`` must not make the task copy from outside the
    staged folder into the model, nor reach MLflow's search as text."""
    play, target, recipe, shared = search
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "model.pt").write_bytes(b"not a model of this search")

    def hostile(experiment: dict) -> dict:
        return {"succeededTrialList": ["../../outside"], "earlyStoppedTrialList": []}

    with FakeKatibApi(hostile) as api:
        with pytest.raises(RuntimeError, match="expected Katib's trial names as DNS labels"):
            search_with(api, target, recipe)
    assert not Path(recipe.output, "model.pt").exists()
    assert not (shared / "tune-a").exists()
