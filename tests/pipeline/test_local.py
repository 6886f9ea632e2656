"""The whole pipeline on this machine through kfp.local."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

# quotes, a backslash before a letter JSON would read as a TAB, a newline, non-ASCII: a
# value that a settings string built by concatenation broke or turned into another setting
EXPERIMENT = 'team\\test "quoted", \n"alias": "champion" ü'


@pytest.mark.integration
@pytest.mark.slow
def test_whole_pipeline_runs_locally_and_registers_a_good_enough_model(sample_zip, tmp_path):
    workdir = tmp_path / "local"
    team_store = f"sqlite:///{tmp_path / 'team.db'}"  # a team's store, from the environment
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "run",
            "--local",
            "--source",
            str(sample_zip),
            "--workdir",
            str(workdir),
            "epochs=1",
            "image_size=40",
            "min_accuracy=0.0",
            f"experiment={EXPERIMENT}",
        ],
        cwd=tmp_path,  # where MLflow puts a SQLite store's artifacts (./mlruns)
        env={**os.environ, "MLFLOW_TRACKING_URI": team_store},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert not (workdir / "mlflow.db").exists()
    # a short account on the screen: a line as each task starts and ends, then the summary
    tasks = ["preflight-op", "download-op", "preprocess-op", "train-op", "evaluate-op"]
    tasks += ["register-op", "deploy-op"]
    for task in tasks:
        assert re.search(rf"^  {task} +started$", done.stdout, re.MULTILINE), task
        assert re.search(rf"^  {task} +success in [\d.]+ s$", done.stdout, re.MULTILINE), task
    assert len(done.stdout.splitlines()) <= 2 * len(tasks) + 10 and done.stderr == ""
    log = re.search(r"^log: +(\S+)$", done.stdout, re.MULTILINE).group(1)
    assert "Executing task" in Path(log).read_text()  # everything kfp.local printed is kept
    run_id = re.search(r"^MLflow run: +(\w+)", done.stdout, re.MULTILINE).group(1)
    assert (workdir / "outputs").is_dir() and "mlflow ui --backend-store-uri" in done.stdout
    run_dir = next((workdir / "outputs").iterdir())
    for produced in (
        "download-op/dataset/download.json",
        "preprocess-op/arrays/meta.json",
        "train-op/trained_model/model.pt",
        "evaluate-op/evaluation/confusion_matrix.png",
        "evaluate-op/report",
    ):
        assert (run_dir / produced).exists(), produced
    client = MlflowClient(team_store)
    run = client.get_run(run_id)
    assert 0.0 <= run.data.metrics["test_accuracy"] <= 1.0
    assert client.get_experiment(run.info.experiment_id).name == EXPERIMENT  # unchanged
    assert run.data.tags["kfp.pipeline_name"] == "dogs-vs-cats" and run.data.tags["kfp.run_id"]
    version = client.get_model_version_by_alias("dogs-vs-cats", "candidate")
    assert version.run_id == run_id
    assert run.data.tags["quality_gate"].startswith("registered dogs-vs-cats version 1")
    page = f"http://127.0.0.1:5000/#/experiments/{run.info.experiment_id}/runs/{run_id}"
    assert re.search(rf"^run page: +{re.escape(page)}$", done.stdout, re.MULTILINE)
    serve = f"serve it: MLFLOW_TRACKING_URI={team_store} python -m components.serve --model"
    assert re.search(
        rf"^next: +{re.escape(serve)} models:/dogs-vs-cats@candidate", done.stdout, re.M
    )


def test_a_run_the_gate_refuses_says_why_and_exactly_what_to_type():
    from pipeline.local import next_step

    said = next_step(
        {
            "registration": "not registered: test accuracy 0.6789 < minimum 0.8500",
            "test_accuracy": 0.6789,
        },
        "sqlite:///runs/local/mlflow.db",
        {},
    )
    assert said.startswith("the gate wants a test accuracy of 0.85 and this model reached 0.6789")
    assert said.endswith("run again with a lower gate: add min_accuracy=0.67")


def test_a_failed_local_run_ends_in_one_line_naming_the_task_and_its_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(tmp_path / "w")]
        + ["--source", str(tmp_path / "missing.zip")],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'team.db'}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert re.search(r"^  download-op +failure in [\d.]+ s$", done.stdout, re.MULTILINE)
    (error,) = done.stderr.splitlines()
    assert error.startswith("the local run failed at download-op: ") and "missing.zip" in error
    assert re.search(r"; full log: \S+\.log$", error)


def test_a_step_and_a_local_run_share_one_history_without_mlflow_tracking_uri(
    small_arrays, tmp_path, monkeypatch
):
    from mlflow.tracking import MlflowClient

    from components.training import session
    from components.training.config import TrainConfig

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.chdir(tmp_path)  # where the user works: the repository's root, say
    step = session.train(
        TrainConfig(data=str(small_arrays), output=str(tmp_path / "model"), dry_run=True)
    )
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(tmp_path / "w")]
        + ["--source", str(tmp_path / "missing.zip")],  # ends at download: enough to log
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1 and "download-op" in done.stderr
    store = f"sqlite:///{tmp_path / 'runs/mlflow.db'}"
    client = MlflowClient(store)
    assert client.get_run(step.run_id)  # the step's run is in the store the pipeline used
    (experiment,) = [e for e in client.search_experiments() if e.name == "dogs-vs-cats"]
    assert experiment.artifact_location == (tmp_path / "runs/mlartifacts").as_uri()
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "w/mlflow.db").exists()
    assert not (tmp_path / "mlruns").exists()
