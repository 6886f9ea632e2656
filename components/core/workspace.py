"""The MLflow workspace a step works in, handed on to the pods it starts."""

from __future__ import annotations

import os
import re

# KFP's MLflow integration sets the profile's namespace: a Kubernetes DNS-1123 label
WORKSPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def workspace_env() -> dict[str, str]:
    """``MLFLOW_WORKSPACE`` where one is set (KFP's MLflow integration sets the profile's
    namespace), for the pods a step starts (trials, training nodes, model servers):
    MLflow finds runs and registered models only in their own workspace.

    Raises:
        ValueError: a workspace that is not a namespace's name (``../``, a newline or
            ``$(VAR)``, which Kubernetes would expand in a pod's environment).
    """
    workspace = os.environ.get("MLFLOW_WORKSPACE", "")
    if not workspace.strip():
        return {}
    if not WORKSPACE.fullmatch(workspace):
        raise ValueError(
            "expected MLFLOW_WORKSPACE to name a profile's namespace (lowercase letters, "
            f"digits and '-', at most 63), found {workspace[:100]!r}; it is not handed on"
        )
    return {"MLFLOW_WORKSPACE": workspace}
