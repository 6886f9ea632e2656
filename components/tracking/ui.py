"""Where the MLflow UI shows a run, or runs side by side."""

from __future__ import annotations

import json
import urllib.parse


def compare_url(ui: str, experiment_id: str, run_ids: list[str]) -> str:
    """The MLflow UI's side-by-side view of ``run_ids``."""
    query = urllib.parse.urlencode(
        {"runs": json.dumps(run_ids), "experiments": json.dumps([experiment_id])}
    )
    return f"{ui.rstrip('/')}/#/compare-runs?{query}"


def run_url(ui: str, experiment_id: str, run_id: str) -> str:
    """The MLflow UI's page of one run."""
    return f"{ui.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def ui_address(tracking_uri: str) -> str:
    """Where the MLflow UI answers: the tracking server, or a local ``mlflow ui``."""
    if tracking_uri.startswith(("http://", "https://")):
        return tracking_uri
    return "http://127.0.0.1:5000"
