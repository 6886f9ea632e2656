"""The MLflow workspace a step works in, handed on to the pods it starts."""

from __future__ import annotations

import os


def workspace_env() -> dict[str, str]:
    """``MLFLOW_WORKSPACE`` where one is set (KFP's MLflow integration sets the profile's
    namespace), for the pods a step starts (trials, training nodes, model servers):
    MLflow finds runs and registered models only in their own workspace."""
    workspace = os.environ.get("MLFLOW_WORKSPACE", "").strip()
    return {"MLFLOW_WORKSPACE": workspace} if workspace else {}
