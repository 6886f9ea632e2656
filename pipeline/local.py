"""Run the whole pipeline on this machine with kfp.local: no Docker, no cluster."""

from __future__ import annotations

import os
from pathlib import Path

from kfp import local

from components.core import tracking
from components.core.names import DEFAULT_EXPERIMENT


def run_local(pipeline, arguments: dict, workdir: Path) -> str:
    """Run ``pipeline`` with ``arguments`` under ``workdir``; a summary of where things are.

    MLflow logs to ``tracking_uri=`` when given, else to ``$MLFLOW_TRACKING_URI`` (a team's
    tracking server), else to a SQLite store in ``workdir`` with its artifacts beside it.
    """
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    store = f"sqlite:///{workdir / 'mlflow.db'}"
    arguments = {"tracking_uri": default_tracking_uri(workdir), **arguments}
    if arguments["tracking_uri"] == store:
        tracking.use_tracking_uri(store)
        tracking.ensure_experiment(
            arguments.get("experiment", DEFAULT_EXPERIMENT), workdir / "mlartifacts"
        )
    local.init(
        runner=local.SubprocessRunner(use_venv=False), pipeline_root=str(workdir / "outputs")
    )
    outputs = pipeline(**arguments).outputs
    return summary(outputs, arguments["tracking_uri"], workdir)


def default_tracking_uri(workdir: Path) -> str:
    """``$MLFLOW_TRACKING_URI``, else the SQLite store in ``workdir``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{Path(workdir) / 'mlflow.db'}"


def summary(outputs: dict, tracking_uri: str, workdir: Path) -> str:
    lines = [
        f"test accuracy: {outputs['test_accuracy']:.4f}",
        f"quality gate:  {outputs['gate']}",
        f"model:         {_newest(workdir.glob('outputs/*/*-op/model'))}",
        f"outputs:       {workdir / 'outputs'}",
        f"MLflow run:    {outputs['mlflow_run_id']} at {tracking_uri}",
    ]
    if tracking_uri.startswith("sqlite:///"):
        lines.append(
            f"MLflow UI:     mlflow ui --backend-store-uri {tracking_uri} "
            "(then open http://127.0.0.1:5000)"
        )
    return "\n".join(lines)


def _newest(paths) -> Path | str:
    return max(paths, key=lambda path: path.stat().st_mtime, default="not found")
