"""Run the whole pipeline on this machine with kfp.local: no Docker, no cluster."""

from __future__ import annotations

import builtins
import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, TextIO

from kfp import local

from components.core.names import DEFAULT_EXPERIMENT
from components.core.uris import split_credentials
from components.tasks.live import LiveView
from components.tracking import store
from components.tracking.ui import experiment_url, run_url, ui_address
from pipeline.next_steps import closing_lines


class LocalRunError(RuntimeError):
    """A task of the local run failed; the message names it, its error and the full log."""


def run_local(
    pipeline: Any,
    arguments: dict[str, Any],
    workdir: Path,
    verbose: bool = False,
    screen: TextIO | None = None,
) -> str:
    """Run ``pipeline`` with ``arguments`` under ``workdir``; a summary of where things are.

    MLflow logs to ``tracking_uri=`` when given, else to ``$MLFLOW_TRACKING_URI`` (a team's
    tracking server), else to the store the steps use too, ``runs/mlflow.db``, with its
    artifacts beside it: one history for everything run on this machine.
    ``screen`` (stdout) gets a line as each task starts and ends, or with ``verbose``
    everything kfp.local prints; the full log is kept under ``workdir/logs``.

    Raises:
        LocalRunError: a task failed.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    arguments = {"tracking_uri": store.tracking_uri(), **arguments}
    # the tasks find a user and password where MLflow looks for them, in their environment
    # (as a cluster's pods do, from a secret): kfp.local prints every task's inputs
    uri, user, password = split_credentials(arguments["tracking_uri"])
    if user is not None:
        os.environ.update(MLFLOW_TRACKING_USERNAME=user, MLFLOW_TRACKING_PASSWORD=password or "")
        arguments["tracking_uri"] = uri
    if arguments["tracking_uri"].startswith("sqlite:///"):  # artifacts beside the database
        store.use_tracking_uri(arguments["tracking_uri"])
        store.use_experiment(arguments.get("experiment", DEFAULT_EXPERIMENT))
    local.init(
        runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(workdir / "outputs")
    )
    log_path = workdir / "logs" / f"{time.strftime('%Y%m%d-%H%M%S')}.log"
    log_path.parent.mkdir(exist_ok=True)
    screen = screen or sys.stdout
    print(f"running on this machine with kfp.local; full log: {log_path}", file=screen)
    with open(log_path, "w", encoding="utf-8") as log:
        view = LiveView(log, screen, verbose)
        try:
            with (
                kfp_swaps_undone(),
                contextlib.redirect_stdout(view),
                contextlib.redirect_stderr(view),
            ):
                outputs = pipeline(**arguments).outputs
        except RuntimeError as err:
            failed = view.failure or str(err)
            raise LocalRunError(f"the local run failed at {failed}; full log: {log_path}") from err
    return summary(outputs, arguments["tracking_uri"], workdir, log_path, arguments)


@contextlib.contextmanager
def kfp_swaps_undone() -> Iterator[None]:
    """Put back what kfp.local swaps process-wide for each task it runs: ``builtins.print``
    (it indents a task's prints) and the root logger's handlers and level.

    kfp.local runs a ParallelFor's iterations in threads, each swapping these for its own
    and back; interleaved, one iteration's swap outlives the run, and every later print of
    the process is indented, every later log line sent to that task's stream.
    """
    root = logging.getLogger()
    printing, handlers, level = builtins.print, root.handlers[:], root.level
    try:
        yield
    finally:
        builtins.print = printing
        root.handlers[:] = handlers
        root.setLevel(level)


def summary(
    outputs: dict[str, Any],
    tracking_uri: str,
    workdir: Path,
    log_path: Path,
    arguments: dict[str, Any],
) -> str:
    """Where a finished run's results are (a pipeline run's, or a sweep's), and what to
    type next."""
    if "compare_url" in outputs:
        lines = [
            f"best run:      {outputs['best_run_id']} (val accuracy "
            f"{outputs['best_val_accuracy']:.4f}, test accuracy {outputs['test_accuracy']:.4f})",
            f"registration:  {outputs['registration']}",
            f"sweep run:     {outputs['parent_run_id']} (the children nest under it) "
            f"at {tracking_uri}",
            f"compare:       {outputs['compare_url']}",
        ]
    else:
        lines = [
            f"test accuracy: {outputs['test_accuracy']:.4f}",
            f"registration:  {outputs['registration']}",
            f"model:         {_newest(workdir.glob('outputs/*/*-op/trained_model'))}",
            f"MLflow run:    {outputs['mlflow_run_id']} at {tracking_uri}",
            *_pages(tracking_uri, outputs["mlflow_run_id"]),
        ]
    lines += [f"outputs:       {workdir / 'outputs'}", f"log:           {log_path}"]
    lines += closing_lines(
        outputs["registration"], outputs["test_accuracy"], tracking_uri, arguments
    )
    return "\n".join(lines)


def _pages(tracking_uri: str, run_id: str) -> list[str]:
    """The run's page and its experiment's runs in the MLflow UI (of the server, or of
    ``mlflow ui`` on this machine)."""
    from mlflow.tracking import MlflowClient

    experiment_id = MlflowClient(tracking_uri).get_run(run_id).info.experiment_id
    ui = ui_address(tracking_uri)
    return [
        f"run page:      {run_url(ui, experiment_id, run_id)}",
        f"all runs:      {experiment_url(ui, experiment_id)}",
    ]


def _newest(paths: Iterable[Path]) -> Path | str:
    return max(paths, key=lambda path: path.stat().st_mtime, default="not found")
