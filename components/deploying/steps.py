"""The deploy step's work once the gate gave a version the alias: roll out, then record."""

from __future__ import annotations

from kubernetes import client as k8s

from components.deploying.config import DeployConfig
from components.deploying.release import deploy
from components.tracking import run_log

SERVING_TAG = "serving.url"  # on the training run: where its model answers


def serve_and_record(cfg: DeployConfig, mlflow_run_id: str, api: k8s.ApiClient) -> str:
    """Serve ``cfg``'s version, tag its URL on the training run; the URL."""
    url = deploy(cfg, api)
    run_log.set_run_tags(mlflow_run_id, {SERVING_TAG: url, "serving.model_uri": cfg.model_uri})
    return url
