"""Training in child processes, watched: one process, or DDP processes under torchrun.

The step's own process stays small (no torch), so that where the pod's memory runs out,
the kernel's OOM killer ends the training, not the process that can say so: it reports
the step as out of memory, naming the limit, and marks the MLflow run FAILED (a killed
process cannot end its own run, which would stay RUNNING).
"""

from __future__ import annotations

import ctypes
import functools
import logging
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from components.core import schema
from components.core.memory import memory_limit, oom_kills
from components.core.names import RUN_ID_FILE
from components.training.config import TrainConfig

log = logging.getLogger(__name__)
PR_SET_PDEATHSIG = 1  # linux/prctl.h


def train_processes(cfg: TrainConfig, processes: int) -> str:
    """Train in one child process, or in ``processes`` DDP processes under torchrun.

    Returns:
        The MLflow run id that the run recorded in its output.

    Raises:
        MemoryError: the kernel's OOM killer ended the training; its run is marked FAILED.
        RuntimeError: the training failed otherwise (its error is in the log above).
    """
    entry = ["-m", "components.train"]
    if processes > 1:
        launcher = ["-m", "torch.distributed.run", "--standalone"]
        entry = [*launcher, f"--nproc-per-node={processes}", *entry]
    kills = oom_kills()
    returncode = _run_watched([sys.executable, *entry, *schema.to_argv(cfg)])
    if returncode == 0:
        return (Path(cfg.output) / RUN_ID_FILE).read_text()
    killed = oom_kills() > kills
    if killed or returncode == -signal.SIGKILL:
        run = _mark_failed(cfg)
        cause = (
            "the kernel's OOM killer ended it"
            if killed
            else "it was killed (SIGKILL), most often by the kernel's OOM killer"
        )
        raise MemoryError(
            f"the train step ran out of memory: {cause} at this pod's memory limit of "
            f"{memory_limit() / 2**30:.1f} GiB{run}. Lower memory_budget_mb, train on "
            "fewer photos (train_photos), lower batch_size, or give the pod more memory"
        )
    raise RuntimeError(f"training failed (exit status {returncode}); its error is above")


def _run_watched(command: list[str]) -> int:
    """Run ``command`` to its end and return its exit status. It dies with this process,
    as it would with the pod, and gets the SIGTERM this process gets (an evicted pod's):
    it stops at its next batch, its run KILLED, as the step would in its own process."""
    parent = os.getpid()
    child = subprocess.Popen(command, preexec_fn=functools.partial(_die_with, parent))
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, lambda *_: child.terminate()) if in_main else None
    try:
        return child.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _die_with(parent: int) -> None:
    """In the child before it runs: the kernel kills it when its parent dies (Linux's
    ``PR_SET_PDEATHSIG``), and it ends at once where the parent is already gone."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


def _mark_failed(cfg: TrainConfig) -> str:
    """Mark the training's MLflow run FAILED, where one is found: what the refusal adds."""
    from components.tracking import run_log
    from components.training.checkpoints import identity_tags

    tags = identity_tags(cfg)
    try:
        run_id = cfg.mlflow_run_id or (tags and run_log.find_run_by_tags(cfg.experiment, tags))
        if not run_id:
            return ""
        if run_log.run_status(run_id) == "RUNNING":
            run_log.finish_run(run_id, {}, {}, status="FAILED")
    except Exception as err:  # noqa: BLE001 - the memory report matters more than the run's status
        log.warning("could not mark the MLflow run FAILED: %s", err)
        return ""
    return f"; MLflow run {run_id} is marked FAILED"
