"""The pipeline under Kubeflow Pipelines 2.17's own MLflow tracking.

KFP's API server, driver and launcher are played by ``tests.support.kfp_tracking`` (a stand-in
built from kubeflow/pipelines' proposal 12862 and its plugin code); the tracking server
is real (PostgreSQL, artifacts proxied into SeaweedFS) and runs with MLflow's workspaces
on, as a multi-user Kubeflow's does; every task runs its own command from the compiled
pipeline under kfp.local.
"""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
from pathlib import Path

import mlflow
import pytest
from kfp import local
from mlflow.tracking import MlflowClient

from components.core.names import REGISTERED_MODEL_NAME
from pipeline.__main__ import LOCAL_TARGET
from pipeline.local import kfp_swaps_undone
from pipeline.pipeline import build_pipeline
from tests.support.kfp_tracking import KfpMlflow
from tests.support.processes import _command, descendants
from tests.support.servers import MlflowServer
from tests.support.tracking_stack import (
    BUCKET,
    BUCKET_KEYS,
    artifact_store,
    database,
    server_flags,
)

WORKSPACE = "kubeflow-user-example-com"  # KFP names the workspace after the profile
EXPERIMENT = "dogs-vs-cats"  # what `submit` names in plugins_input; a test's own beside
SWEEP_MODEL = "dogs-vs-cats-sweep"
HANG = 900  # seconds: a limit that only a hang reaches
TASKS = {"preflight-op", "download-op", "preprocess-op", "train-op", "evaluate-op"}
TASKS |= {"register-op", "deploy-op"}
# kfp.local says that it ignores the tasks' requests and limits and runs their image's
# command in this Python, as it should here
pytestmark = [
    pytest.mark.filterwarnings("ignore:Task .* have no effect in the current local runner"),
    pytest.mark.filterwarnings("ignore:You may be attemping to run a task:RuntimeWarning"),
]


@pytest.fixture(scope="module")
def workspace_server(tmp_path_factory):
    """The tracking server as the cluster runs it, with ``--enable-workspaces`` and the
    profile's workspace made, on a database and a bucket of its own (workspaces change
    the database's schema)."""
    with artifact_store() as s3, database() as postgres:
        flags, env = server_flags(postgres)
        workdir = tmp_path_factory.mktemp("mlflow-workspaces")
        if flags is None:
            flags = [
                *("--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}"),
                *("--serve-artifacts", "--artifacts-destination", f"s3://{BUCKET}"),
            ]
        flags = [*flags, "--enable-workspaces"]
        with MlflowServer(workdir, s3.endpoint, BUCKET, flags=flags, env=env) as server:
            mlflow.set_tracking_uri(server.url)
            mlflow.create_workspace(WORKSPACE)
            yield server


@pytest.fixture
def kfp_cluster(workspace_server, tmp_path, monkeypatch, request):
    """A pipeline run's MLflow side as KFP makes it, in an experiment of the test's own;
    this process outside any workspace, so a step that dropped ``MLFLOW_WORKSPACE``
    would find nothing."""
    for key in (*BUCKET_KEYS, "MLFLOW_WORKSPACE", "MLFLOW_EXPERIMENT_ID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", workspace_server.url)
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
    monkeypatch.chdir(tmp_path)
    experiment = f"{EXPERIMENT} {request.node.name.removeprefix('test_')[:40]}"
    kfp = KfpMlflow(workspace_server.url, WORKSPACE, experiment)
    kfp.create_run()
    return kfp


def in_workspace(monkeypatch) -> MlflowClient:
    monkeypatch.setenv("MLFLOW_WORKSPACE", WORKSPACE)  # read back as the profile does
    return MlflowClient()


def run_pipeline(pipeline, arguments: dict, workdir: Path) -> None:
    """The pipeline under kfp.local, each task its own process, as ``run --local`` runs it."""
    runner = local.SubprocessRunner(use_venv=False)
    local.init(runner=runner, pipeline_root=str(workdir / "outputs"), raise_on_error=True)
    with kfp_swaps_undone():
        pipeline(**arguments)


def killed_after_its_first_checkpoint(kfp: KfpMlflow, workdir: Path):
    """The train task's first attempt: its pod is lost once a checkpoint reached MLflow
    (SIGKILL, the pod's disk gone with it); KFP retries the task."""

    def first_attempt(run_attempt):
        def kill_when_checkpointed() -> None:
            deadline = time.monotonic() + HANG
            while time.monotonic() < deadline:
                run_id = kfp.task_runs.get("train-op")
                search = {"experiment_ids": [kfp.experiment_id], "filter": "name = 'checkpoint'"}
                found = run_id and kfp.call("POST", "logged-models/search", search)
                if found and any(
                    m["info"]["status"] == "LOGGED_MODEL_READY" for m in found.get("models", [])
                ):
                    break
                time.sleep(0.1)
            for pid in descendants(os.getpid()):
                if "--function_to_execute train_op" in _command(pid):
                    os.kill(pid, signal.SIGKILL)

        watcher = threading.Thread(target=kill_when_checkpointed, daemon=True)
        watcher.start()
        outputs, outcome = run_attempt()
        watcher.join()
        for output in workdir.rglob("train-op/trained_model"):
            shutil.rmtree(output)  # a retried pod starts on a fresh disk
        return outputs, outcome

    return first_attempt


@pytest.mark.integration
@pytest.mark.slow
def test_the_train_tasks_kfp_run_is_the_models_run_and_a_retry_resumes_it(
    kfp_cluster, small_sample_zip, tmp_path, monkeypatch
):
    kfp = kfp_cluster
    workdir = tmp_path / "w"
    kfp.first_attempt["train-op"] = killed_after_its_first_checkpoint(kfp, workdir)
    arguments = {"source": str(small_sample_zip), "epochs": 3, "min_accuracy": 0.0}
    arguments |= {"tracking_uri": kfp.tracking_uri, "experiment": kfp.experiment_name}
    with kfp.tracking_tasks():
        run_pipeline(build_pipeline(LOCAL_TARGET), arguments, workdir)
    kfp.end_run(succeeded=True)

    client = in_workspace(monkeypatch)
    nested = {run["info"]["run_name"]: run["info"] for run in kfp.nested_runs()}
    assert set(nested) == TASKS  # one run a task, each once: the retry reused its own
    assert {info["status"] for info in nested.values()} == {"FINISHED"}
    # no second tree: the experiment holds KFP's parent and its tasks, nothing else
    everything = client.search_runs([kfp.experiment_id], max_results=100)
    assert {run.info.run_id for run in everything} == {
        kfp.parent_run_id,
        *(info["run_id"] for info in nested.values()),
    }
    train_run = client.get_run(nested["train-op"]["run_id"])
    # the recipe, the per-epoch metrics over both attempts, each epoch once
    assert train_run.data.params["model"] == "tutorial_cnn"  # the step's, as everywhere
    steps = [m.step for m in client.get_metric_history(train_run.info.run_id, "val_accuracy")]
    assert sorted(steps) == [1, 2, 3]
    assert train_run.data.tags["mlflow.parentRunId"] == kfp.parent_run_id
    assert train_run.data.tags["mlflow.runName"] == "train-op"  # KFP's name, kept
    # the test metrics, the logged model and the registered version point at that run
    assert "test_accuracy" in train_run.data.metrics
    (model,) = client.search_logged_models([kfp.experiment_id], filter_string="name = 'model'")
    assert model.source_run_id == train_run.info.run_id
    version = client.get_model_version_by_alias(REGISTERED_MODEL_NAME, "candidate")
    assert version.run_id == train_run.info.run_id
    # the launcher's own record of the evaluate task: its scalar metrics, its inputs
    evaluate_run = client.get_run(nested["evaluate-op"]["run_id"])
    assert evaluate_run.data.metrics["accuracy"] == train_run.data.metrics["test_accuracy"]
    assert evaluate_run.data.params["mlflow_run_id"] == f'"{train_run.info.run_id}"'
    # nothing of it outside the profile's workspace
    monkeypatch.delenv("MLFLOW_WORKSPACE")
    assert MlflowClient().get_experiment_by_name(kfp.experiment_name) is None


@pytest.mark.integration
@pytest.mark.slow
def test_a_sweeps_iterations_are_kfps_iteration_runs_under_its_parent(
    kfp_cluster, small_sample_zip, tmp_path, monkeypatch
):
    kfp = kfp_cluster
    arguments = {
        "source": str(small_sample_zip),
        "epochs": 1,
        "image_size": 40,
        "min_accuracy": 0.0,
        "registered_model_name": SWEEP_MODEL,  # the other test's version holds @candidate
    }
    arguments |= {"tracking_uri": kfp.tracking_uri, "experiment": kfp.experiment_name}
    arguments["grid"] = ['{"lr": 0.001}', '{"lr": 0.003}']
    with kfp.tracking_tasks():
        run_pipeline(build_pipeline(LOCAL_TARGET, sweep=True), arguments, tmp_path / "w")
    parent = in_workspace(monkeypatch).get_run(kfp.parent_run_id)
    assert parent.info.status == "RUNNING"  # KFP's to end, not the sweep's
    kfp.end_run(succeeded=True)

    client = in_workspace(monkeypatch)
    nested = kfp.nested_runs()
    (loop,) = [run["info"] for run in nested if run["info"]["run_name"] == "for-loop-1"]
    children = [run for run in nested if tag(run, "mlflow.parentRunId") == loop["run_id"]]
    assert sorted(run["info"]["run_name"] for run in children) == [
        "evaluate-op",
        "evaluate-op",
        "train-op",
        "train-op",
    ]
    trained = {
        client.get_run(run["info"]["run_id"]).data.params["lr"]: run["info"]["run_id"]
        for run in children
        if run["info"]["run_name"] == "train-op"
    }
    assert set(trained) == {"0.001", "0.003"}
    # the sweep's record is on KFP's parent run: no parent of its own beside it
    parent = client.get_run(kfp.parent_run_id)
    assert parent.data.tags["search.kind"] == "grid"
    assert parent.data.tags["search.best_run_id"] in trained.values()
    assert parent.data.params["sweep_size"] == "2"
    assert {run.info.run_id for run in client.search_runs([kfp.experiment_id])} == {
        kfp.parent_run_id,
        *(run["info"]["run_id"] for run in nested),
    }
    best = client.get_model_version_by_alias(SWEEP_MODEL, "candidate")
    assert best.run_id == parent.data.tags["search.best_run_id"]


def tag(run: dict, key: str) -> str | None:
    return {t["key"]: t["value"] for t in run["data"].get("tags", [])}.get(key)
