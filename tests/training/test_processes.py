"""Training in a watched child process: a child the kernel kills is reported as out of
memory, and its MLflow run marked FAILED instead of left RUNNING.

The kill is the signal the kernel's OOM killer sends (SIGKILL), sent by the test once the
run has started: a test cannot make a memory cgroup of its own everywhere. The OOM
killer's own counters are read as the kernel lays them out (tests/core/test_memory.py).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from mlflow.tracking import MlflowClient

from components.tracking import run_log
from components.tracking.tags import KFP_RUN_ID_TAG
from components.training.processes import train_processes
from tests.support.helpers import train_config as config
from tests.support.processes import HANG_SECONDS
from tests.support.servers import REPO


def kill_the_training_once_its_run_is_running(tags: dict[str, str], experiment: str) -> None:
    """SIGKILL the training child, as the OOM killer would, once its MLflow run runs."""
    deadline = time.monotonic() + HANG_SECONDS
    while time.monotonic() < deadline:
        run_id = run_log.find_run_by_tags(experiment, tags)
        if run_id and run_log.run_status(run_id) == "RUNNING":
            for child in psutil.Process().children(recursive=True):
                try:
                    if "components.train" in " ".join(child.cmdline()):
                        child.send_signal(signal.SIGKILL)
                        return
                except psutil.Error:  # a child that ended meanwhile
                    continue
        time.sleep(0.2)


@pytest.mark.slow
def test_a_training_the_kernel_kills_is_reported_out_of_memory_and_its_run_failed(
    small_arrays, tmp_path, mlflow_store
):
    cfg = config(small_arrays, tmp_path / "out", epochs=1000, kfp_run_id="kfp-run-oom")
    tags = {KFP_RUN_ID_TAG: "kfp-run-oom"}
    killer = threading.Thread(
        target=kill_the_training_once_its_run_is_running, args=(tags, cfg.experiment)
    )
    killer.start()
    try:
        with pytest.raises(MemoryError) as refused:
            train_processes(cfg, processes=1)
    finally:
        killer.join()
    said = str(refused.value)
    assert "the train step ran out of memory: it was killed (SIGKILL)" in said
    assert "memory limit of" in said and "Lower memory_budget_mb" in said
    run = MlflowClient(mlflow_store).get_run(run_log.find_run_by_tags(cfg.experiment, tags))
    assert run.info.status == "FAILED" and f"MLflow run {run.info.run_id} is marked FAILED" in said


def test_a_training_that_fails_on_its_own_says_its_error_is_above(
    small_arrays, tmp_path, mlflow_store
):
    cfg = config(small_arrays, tmp_path / "out", epochs=1, start_size=64)  # over the 40 px
    with pytest.raises(RuntimeError, match=r"training failed \(exit status 1\); its error is"):
        train_processes(cfg, processes=1)


@pytest.mark.slow
def test_the_training_dies_with_the_step_as_it_would_with_its_pod(small_arrays, tmp_path):
    """The step's process killed (its pod lost): the training child goes with it, and
    never goes on to log a model of its own beside the retry's."""
    probe = (
        "import sys\n"
        "from components.training.processes import train_processes\n"
        "from tests.support.helpers import train_config\n"
        f"train_processes(train_config({str(small_arrays)!r}, {str(tmp_path / 'out')!r}, "
        "epochs=1000), 1)\n"
    )
    step = subprocess.Popen([sys.executable, "-c", probe], cwd=REPO)
    deadline = time.monotonic() + HANG_SECONDS
    training = []
    while not training and time.monotonic() < deadline:
        training = [c for c in psutil.Process(step.pid).children() if c.is_running()]
        time.sleep(0.1)
    step.kill()
    step.wait()
    (child,) = training
    child.wait(HANG_SECONDS)  # ends, not orphaned: raises TimeoutExpired otherwise
    assert not child.is_running()
