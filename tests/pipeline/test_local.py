"""The whole pipeline on this machine through kfp.local."""

from __future__ import annotations

import builtins
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from pipeline.local import LocalRunError, run_local
from tests.conftest import REPO
from tests.support.processes import HANG_SECONDS

# quotes, a backslash before a letter JSON would read as a TAB, a newline, non-ASCII: a
# value that a settings string built by concatenation broke or turned into another setting
EXPERIMENT = 'team\\test "quoted", \n"alias": "champion" ü'


@pytest.mark.integration
@pytest.mark.slow
def test_whole_pipeline_runs_locally_registers_and_serves_as_the_readme_says(
    small_sample_zip, small_arrays, tmp_path, monkeypatch
):
    """The README's first ten minutes: the pipeline on the sample with the tutorial preset
    into the default store, then the registered model served from that store and asked,
    V1 and v2, with the bodies the README builds (one epoch and a gate of 0, for time).
    A step run first from the same folder, with no MLFLOW_TRACKING_URI either, shares that
    store's history."""
    from components.training import session
    from components.training.config import TrainConfig

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    monkeypatch.chdir(tmp_path)  # where the user works: the repository's root, say
    step = session.train(
        TrainConfig(data=str(small_arrays), output=str(tmp_path / "model"), dry_run=True)
    )
    workdir = tmp_path / "runs/local"  # the default --workdir, under the folder run from
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    done = subprocess.run(
        [
            *(
                sys.executable,
                "-m",
                "pipeline",
                "run",
                "--local",
                "--source",
                str(small_sample_zip),
            ),
            *("--preset", "tutorial", "epochs=1", "min_accuracy=0.0", f"experiment={EXPERIMENT}"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    store = f"sqlite:///{tmp_path / 'runs/mlflow.db'}"  # the default store, as printed
    assert not (workdir / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()
    assert not (tmp_path / "mlflow.db").exists()
    # a short account on the screen: a line as each task starts and ends, then the summary
    tasks = ["preflight-op", "download-op", "preprocess-op", "train-op", "evaluate-op"]
    tasks += ["register-op", "deploy-op"]
    for task in tasks:
        assert re.search(rf"^  {task} +started$", done.stdout, re.MULTILINE), task
        assert re.search(rf"^  {task} +success in [\d.]+ s$", done.stdout, re.MULTILINE), task
    # and the train task's epoch as it ends (one epoch here), as the log has it
    epoch = r"^  train-op +epoch 1/1: train_loss [\d.]+, val_loss [\d.]+, val_accuracy [\d.]+$"
    assert len(re.findall(epoch, done.stdout, re.MULTILINE)) == 1
    assert len(done.stdout.splitlines()) <= 2 * len(tasks) + 12 and done.stderr == ""
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
    client = MlflowClient(store)
    assert client.get_run(step.run_id)  # the step's run is in the store the pipeline used
    (experiment,) = [e for e in client.search_experiments() if e.name == "dogs-vs-cats"]
    assert experiment.artifact_location == (tmp_path / "runs/mlartifacts").as_uri()
    run = client.get_run(run_id)
    assert 0.0 <= run.data.metrics["test_accuracy"] <= 1.0
    assert client.get_experiment(run.info.experiment_id).name == EXPERIMENT  # unchanged
    assert run.data.tags["kfp.pipeline_name"] == "dogs-vs-cats" and run.data.tags["kfp.run_id"]
    version = client.get_model_version_by_alias("dogs-vs-cats", "candidate")
    assert version.run_id == run_id
    assert run.data.tags["quality_gate"].startswith("registered dogs-vs-cats version 1")
    experiment = f"http://127.0.0.1:5000/#/experiments/{run.info.experiment_id}"
    page = f"{experiment}/runs/{run_id}?workflowType=machine_learning"
    assert re.search(rf"^run page: +{re.escape(page)}$", done.stdout, re.MULTILINE)
    runs = f"{experiment}?workflowType=machine_learning"
    assert re.search(rf"^all runs: +{re.escape(runs)}$", done.stdout, re.MULTILINE)
    serve = f"serve it: MLFLOW_TRACKING_URI={store} python -m components.serve --model"
    assert re.search(
        rf"^next: +{re.escape(serve)} models:/dogs-vs-cats@candidate", done.stdout, re.M
    )
    # the README's clean-up: the tasks' outputs go, the runs and the registry stay
    shutil.rmtree(workdir / "outputs")
    served_as_the_readme_says(store, small_sample_zip, tmp_path)
    # a second run on another split: the gate scores version 1 again on its test photos
    again = subprocess.run(
        [*done.args, "split_seed=1"], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=HANG_SECONDS,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-5000:]
    photos = (
        r"on the same \d+ test photos \(of test photos sha256 [0-9a-f]{12}…\), "
        "which neither trained on, version 1 scored again on them"
    )
    assert re.search(
        rf"^registration: +registered dogs-vs-cats version 2 .*{photos}", again.stdout, re.M
    ), again.stdout


def readme_serve_block(zip_path: Path, port: int) -> str:
    """The README's step 4, as a user pastes it: from its first comment to ``kill %1``,
    with the sample's path and a free port in place of ``8080``."""
    text = (REPO / "README.md").read_text()
    start = text.index("# 4. serve the registered model")
    end = text.index("kill %1", start) + len("kill %1")
    block = text[start:end].replace("tests/fixtures/petimages-sample.zip", str(zip_path))
    return block.replace("8080", str(port))


def served_as_the_readme_says(store: str, sample_zip: Path, tmp_path: Path) -> None:
    """The README's serve block pasted whole into bash in the folder the pipeline ran
    from: it waits until the model serves, then asks it with the V1 and v2 bodies it
    builds, and each answer is predict's for that photo."""
    import json

    from components.evaluation.predictions import predict_files
    from tests.support.servers import free_port

    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    block = readme_serve_block(sample_zip, free_port())
    done = subprocess.run(
        ["bash", "-c", f"{block}\nwait"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=HANG_SECONDS,
    )  # fmt: skip
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and len(answers) == 3, done.stdout + done.stderr[-3000:]
    ready, first, second = answers
    photo = tmp_path / "scratch/PetImages/Dog/101.jpg"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_TRACKING_URI", store)
        ((_, name, probability),) = predict_files(
            "models:/dogs-vs-cats@candidate", [photo]
        ).classified
    assert ready == {"name": "dogs-vs-cats", "ready": True}
    assert first["predictions"] == [
        {"class": name, "probability": pytest.approx(probability, abs=1e-4)}
    ]
    outputs = {o["name"]: o["data"] for o in second["outputs"]}
    assert outputs["class"] == [name]
    assert outputs["probability"] == [pytest.approx(probability, abs=1e-4)]


def broken_zip(folder: Path) -> Path:
    """A file that is there, named .zip, and is no archive: the download task fails."""
    path = folder / "broken.zip"
    path.write_bytes(b"not a zip archive")
    return path


def test_a_failed_local_run_ends_in_one_line_naming_the_task_and_its_error(mlflow_store, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(tmp_path / "w")]
        + ["--source", str(broken_zip(tmp_path))],
        cwd=tmp_path,
        env=os.environ,  # MLFLOW_TRACKING_URI: the team's store, a SQLite file here
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 1
    assert re.search(r"^  download-op +failure in [\d.]+ s$", done.stdout, re.MULTILINE)
    (error,) = done.stderr.splitlines()
    assert error.startswith("the local run failed at download-op: ") and "broken.zip" in error
    assert re.search(r"; full log: \S+\.log$", error)


PRINT = builtins.print


def parallel_tasks_that_fail(**arguments):
    """A pipeline as kfp.local runs a ParallelFor of two tasks, each in its own thread:
    kfp's own per-task context managers (an indenting ``builtins.print``, the root
    logger's handlers swapped for the task's) entered and left interleaved, as those
    threads can; then a task fails."""
    from kfp.local import logging_utils

    for swap in (logging_utils.indented_print, logging_utils.local_logger_context):
        first, second = swap(), swap()
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        second.__exit__(None, None, None)  # puts back what first put in place
    assert builtins.print is not PRINT  # the interleaving left a swap behind
    raise RuntimeError("Task 'train-op' finished with status FAILURE")


def test_a_local_run_leaves_print_and_logging_as_they_were(mlflow_store, tmp_path):
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    with pytest.raises(LocalRunError, match="the local run failed"):
        run_local(parallel_tasks_that_fail, {}, tmp_path)
    assert builtins.print is PRINT
    assert root.handlers == handlers and root.level == level


@pytest.mark.integration
@pytest.mark.slow
def test_your_own_photos_run_and_answer_by_class_as_the_readme_says(mlflow_store, tmp_path):
    """The README's two commands for a team's own photos, as typed: five flower classes
    through every task under registered_model_name=flowers, then a folder of photos named
    by class from models:/flowers@candidate (a gate of 0: 6 test photos show little; one
    of the preset's 15 epochs: the road is the same, probe and fine-tune both)."""
    flowers = REPO / "tests/fixtures/flowers-small.zip"
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--preset", "few-photos"]
        + ["--source", str(flowers), "registered_model_name=flowers", "min_accuracy=0"]
        + ["epochs=1"],
        cwd=tmp_path,
        env=os.environ,  # MLFLOW_TRACKING_URI: a SQLite file here
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "registered flowers version 1 as @candidate" in done.stdout
    album = tmp_path / "my-photos"
    shutil.unpack_archive(flowers, tmp_path / "unpacked")
    shutil.copytree(tmp_path / "unpacked/flower_photos/roses", album)
    answered = subprocess.run(
        [sys.executable, "-m", "components.predict", "--model", "models:/flowers@candidate"]
        + ["my-photos/"],
        cwd=tmp_path,
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert answered.returncode == 0, answered.stderr[-3000:]
    labels = [line.split("\t")[1] for line in answered.stdout.splitlines()]
    assert len(labels) == 12 and set(labels) <= {
        "daisy",
        "dandelion",
        "roses",
        "sunflowers",
        "tulips",
    }
    version = MlflowClient(mlflow_store).get_model_version("flowers", "1")
    assert version.tags["classes"] == '["daisy", "dandelion", "roses", "sunflowers", "tulips"]'
