"""The tracking store: its URI (credentials kept out of it), the server's health, and
experiments by name."""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
from pathlib import Path

import mlflow
import requests
from mlflow.environment_variables import MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING
from mlflow.tracking import MlflowClient

from components.core import uris
from components.core.names import MLFLOW_HTTP_LIMITS

# one history on one machine: every step and the local pipeline, from where they run
DEFAULT_STORE = Path("runs/mlflow.db")


class TrackingUnavailableError(RuntimeError):
    """The MLflow tracking server cannot be reached; nothing was trained."""


def default_store() -> str:
    """The SQLite store that every step and the local pipeline share when
    ``$MLFLOW_TRACKING_URI`` names none: ``runs/mlflow.db`` under the working directory
    (the repository's root in every example)."""
    DEFAULT_STORE.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{DEFAULT_STORE.resolve()}"


def tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else the default store (``default_store``).

    A user and password in the URI move to MLflow's own ``MLFLOW_TRACKING_USERNAME`` and
    ``MLFLOW_TRACKING_PASSWORD``, so that no URI MLflow or this project shows holds them.
    A SQLite store is made by one process at a time (``_made_once``). MLflow's HTTP limits
    (``MLFLOW_HTTP_LIMITS``) and its artifact progress bars (on a terminal only: in a log
    they are noise) are set where unset, for this process and its children.
    """
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", str(sys.stderr.isatty()).lower())
    for name, value in MLFLOW_HTTP_LIMITS.items():
        os.environ.setdefault(name, value)
    uri, user, password = uris.split_credentials(
        os.environ.get("MLFLOW_TRACKING_URI") or default_store()
    )
    if user is not None:
        os.environ["MLFLOW_TRACKING_URI"] = uri
        os.environ["MLFLOW_TRACKING_USERNAME"] = user
        os.environ["MLFLOW_TRACKING_PASSWORD"] = password or ""
    if uri.startswith("sqlite:///"):
        _made_once(uri)
    return uri


def client() -> MlflowClient:
    """The tracking store's client: how every module of this project reaches the store."""
    return MlflowClient(tracking_uri())


def _made_once(uri: str) -> None:
    """Make a SQLite store's tables on its first use, under a lock beside it: two commands
    started at once on a new store would both create them, and one would crash."""
    database = Path(uri.removeprefix("sqlite:///")).resolve()
    made = database.with_name(f".{database.name}.made")
    if made.exists() or not database.parent.is_dir():
        return  # made, or a folder MLflow will say is missing
    with open(database.with_name(f".{database.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not made.exists():
            MlflowClient(uri).search_experiments(max_results=1)  # creates its tables
            made.touch()


def check_server(uri: str | None = None, timeout: float = 10.0) -> None:
    """Fail fast, before any real work, when an HTTP tracking server does not answer."""
    uri = uris.split_credentials(uri)[0] if uri else tracking_uri()
    if not uri.startswith(("http://", "https://")):
        return
    user, password = (os.environ.get(f"MLFLOW_TRACKING_{k}") for k in ("USERNAME", "PASSWORD"))
    auth = (user, password or "") if user else None
    try:
        requests.get(f"{uri.rstrip('/')}/health", timeout=timeout, auth=auth).raise_for_status()
    except requests.RequestException as err:
        raise TrackingUnavailableError(
            f"the MLflow tracking server at {uri} is unreachable ({err}); start it, or point "
            "MLFLOW_TRACKING_URI (in a pipeline: its tracking_uri parameter) at one that runs"
        ) from err


def logs_system_metrics() -> bool:
    """Whether a run samples ``system/`` metrics (CPU, memory, disk, GPU) as MLflow does.

    On where psutil is installed, unless ``MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING`` says
    otherwise. MLflow samples every ``MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL`` seconds
    (10), so a run shorter than that has none.
    """
    if MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING.is_set():
        return bool(MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING.get())
    return importlib.util.find_spec("psutil") is not None


def use_tracking_uri(uri: str | None) -> None:
    """Make ``uri`` the tracking URI for this process and its children; empty keeps the default."""
    if uri:
        os.environ["MLFLOW_TRACKING_URI"] = uri
        tracking_uri()  # its credentials, if any, move to MLflow's own variables


# the tag MLflow's UI reads to open an experiment on its runs (a model's training) or on
# traces (GenAI); its values are the UI's ExperimentKind
KIND_TAG, EXPERIMENT_KIND = "mlflow.experimentKind", "custom_model_development"
# what the Model Registry answers for a name, alias or version it does not hold
REGISTRY_ABSENT = {"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"}


def use_experiment(name: str) -> str:
    """Make ``name`` the active experiment, created first where missing; its id.

    On a SQLite store its artifacts go beside the database (``mlartifacts/`` there), as
    ``python -m pipeline run --local`` puts them, never into the working directory's
    ``./mlruns``, where MLflow would put them; a tracking server says where itself. An
    experiment that says no kind is marked as training models (``EXPERIMENT_KIND``), so
    that MLflow's UI opens it on its runs, not on a GenAI overview of traces.
    """
    uri = tracking_uri()
    if uri.startswith("sqlite:///"):
        database = Path(uri.removeprefix("sqlite:///")).resolve()
        ensure_experiment(name, database.parent / "mlartifacts")
    experiment = mlflow.set_experiment(name)
    if KIND_TAG not in experiment.tags:
        client().set_experiment_tag(experiment.experiment_id, KIND_TAG, EXPERIMENT_KIND)
    return experiment.experiment_id


def ensure_experiment(name: str, artifact_location: Path) -> None:
    """Create experiment ``name`` with its artifacts at ``artifact_location``, unless it exists."""
    tracking = client()
    if tracking.get_experiment_by_name(name) is None:
        tracking.create_experiment(name, artifact_location=Path(artifact_location).as_uri())
