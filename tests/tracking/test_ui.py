"""The MLflow UI's addresses: a run's page, runs side by side."""

from __future__ import annotations

import json
import urllib.parse

from components.tracking import ui


def test_the_compare_view_lists_every_run_of_the_experiment():
    url = ui.compare_url("http://mlflow:5000/", "4", ["a", "b"])
    base, query = url.split("#/compare-runs?")
    assert base == "http://mlflow:5000/"
    params = dict(urllib.parse.parse_qsl(query))
    assert json.loads(params["runs"]) == ["a", "b"] and json.loads(params["experiments"]) == ["4"]
    assert ui.ui_address("https://mlflow.example") == "https://mlflow.example"
    assert ui.ui_address("sqlite:///runs/mlflow.db") == "http://127.0.0.1:5000"


def test_a_runs_page_is_under_its_experiment_and_both_show_model_training():
    """MLflow's UI shows an experiment as GenAI work (traces) unless told otherwise."""
    assert ui.run_url("http://mlflow:5000/", "4", "abc") == (
        "http://mlflow:5000/#/experiments/4/runs/abc?workflowType=machine_learning"
    )
    assert ui.experiment_url("http://mlflow:5000", "4") == (
        "http://mlflow:5000/#/experiments/4?workflowType=machine_learning"
    )
