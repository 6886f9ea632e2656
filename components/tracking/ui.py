"""Where the MLflow UI shows an experiment's runs, a run, or runs side by side."""

from __future__ import annotations

import json
import urllib.parse

# MLflow's UI shows an experiment as model training (its runs table) or as GenAI work (an
# overview of traces), by this query parameter, else by the browser's last choice: GenAI
MODEL_TRAINING = "workflowType=machine_learning"


def experiment_url(ui: str, experiment_id: str) -> str:
    """The MLflow UI's table of an experiment's runs."""
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}?{MODEL_TRAINING}"


def compare_url(ui: str, experiment_id: str, run_ids: list[str]) -> str:
    """The MLflow UI's side-by-side view of ``run_ids``."""
    query = urllib.parse.urlencode(
        {"runs": json.dumps(run_ids), "experiments": json.dumps([experiment_id])}
    )
    return f"{ui.rstrip('/')}/#/compare-runs?{query}"


def run_url(ui: str, experiment_id: str, run_id: str) -> str:
    """The MLflow UI's page of one run."""
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}?{MODEL_TRAINING}"


def ui_address(tracking_uri: str) -> str:
    """Where the MLflow UI answers: the tracking server, or a local ``mlflow ui``."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri
    return "http://127.0.0.1:5000"
