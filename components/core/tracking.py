"""MLflow tracking: the only module that imports mlflow.

Runs line up column for column in the MLflow UI because every step logs through
these few functions, under the same names every time.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import importlib.util
import logging
import os
import re
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

import mlflow
import numpy as np
import requests
from mlflow.data.dataset_source_registry import resolve_dataset_source
from mlflow.data.meta_dataset import MetaDataset
from mlflow.data.numpy_dataset import NumpyDataset, from_numpy
from mlflow.entities import LoggedModel, LoggedModelOutput, LoggedModelStatus
from mlflow.entities.model_registry import RegisteredModel
from mlflow.environment_variables import MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING
from mlflow.exceptions import MlflowException
from mlflow.models import Model, ModelSignature, infer_signature
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.tracking import MlflowClient
from mlflow.types import ColSpec, Schema

from components.core import identity, uris
from components.core.names import CLASSES, MLFLOW_HTTP_LIMITS

if TYPE_CHECKING:  # torch and matplotlib load where a model or a figure is logged
    import torch
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

# one history on one machine: every step and the local pipeline, from where they run
DEFAULT_STORE = Path("runs/mlflow.db")
KFP_RUN_ID_TAG = "kfp.run_id"
KFP_PIPELINE_TAG = "kfp.pipeline_name"
DIVERGED_TAG = "training.diverged"  # why the run stopped at a non-finite loss
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own: the UI nests a child under its parent
COMBINATION_TAG = "sweep.combination"  # the recipe settings a sweep's child run varies
SWEEP_PARENT_TAG = "sweep.parent"  # "true" on a sweep's parent run
TRIAL_TAG = "tune.trial"  # the search trial a run is: a Katib trial's name, an Optuna number
TUNE_PARENT_TAG = "tune.parent"  # "true" on a search's parent run
STOPPED_EARLY_TAG = "tune.stopped_early"  # "true" on a trial the median rule stopped
TUNE_BEST_TAG = "tune.best"  # "true" on the search's best trial
OUTPUT_TAG = "training.output"  # the folder a run's training writes; resume checks it
STORE_TAG = "training.checkpoint_uri"  # its durable checkpoint store, where it has one
# a resumed run trained to more epochs than its `epochs` param (params cannot change)
EPOCHS_TAG = "training.epochs"
CHECKPOINT_MODEL = "checkpoint"  # the logged model each epoch's checkpoint is
CHECKPOINT_FILE = "checkpoint.pt"
EPOCH_TAG = "epoch"  # on a checkpoint model: the epoch it ends
KEPT_CHECKPOINTS = 2  # the newest checkpoints a run keeps, and the best besides
KFP_PIPELINE_RUN_TAG = "kfp.pipeline_run_id"  # KFP's own tag on its parent run
MODEL_NAME = "model"
IDENTITY_TAG = "sha256."  # on a logged model: sha256.FILE, the digest of each of its files


for _name, _value in MLFLOW_HTTP_LIMITS.items():
    os.environ.setdefault(_name, _value)
# MLflow's artifact progress bars only on a terminal: in a log or a pipe they are noise
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", str(sys.stderr.isatty()).lower())


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
    A SQLite store is made by one process at a time (``_made_once``).
    """
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


@dataclass(frozen=True)
class KfpTask:
    """What KFP's own MLflow tracking (KFP >= 2.17) sets on a task's container: the task's
    nested run, made by KFP's driver under the pipeline run's parent run, and its
    experiment and workspace."""

    run_id: str
    experiment_id: str
    workspace: str | None


def kfp_task() -> KfpTask | None:
    """KFP's run for this task, where KFP's MLflow integration made one; else None.

    KFP's driver sets ``MLFLOW_RUN_ID`` with ``MLFLOW_EXPERIMENT_ID``; MLflow itself sets
    only the experiment (``mlflow.set_experiment`` exports it to child processes), so the
    pair tells KFP's run from a process's own choice of experiment.
    """
    run_id, experiment_id = os.environ.get("MLFLOW_RUN_ID"), os.environ.get("MLFLOW_EXPERIMENT_ID")
    if not (run_id and experiment_id):
        return None
    return KfpTask(run_id, experiment_id, os.environ.get("MLFLOW_WORKSPACE") or None)


def pipeline_experiment(name: str) -> str:
    """The experiment's name a pipeline step uses: KFP's, where KFP's MLflow integration
    made this task's run (KFP puts a pipeline run's runs in the experiment named at run
    creation, else ``Default``), else ``name``."""
    task = kfp_task()
    if task is None:
        return name
    found = MlflowClient(tracking_uri()).get_experiment(task.experiment_id).name
    if found != name:
        log.info("KFP tracks this run in MLflow experiment %r; logging there, not %r", found, name)
    return found


def experiment_id(name: str) -> str:
    """The id of the experiment a step logs into, made active: KFP's, where KFP's MLflow
    integration made this task's run (``MLFLOW_EXPERIMENT_ID``), else ``name``'s (created
    where missing); the two never disagree."""
    task = kfp_task()
    if task is None:
        return use_experiment(name)
    mlflow.set_tracking_uri(tracking_uri())
    return mlflow.set_experiment(experiment_id=task.experiment_id).experiment_id


@contextlib.contextmanager
def start_run(
    experiment: str,
    *,
    run_id: str | None = None,
    run_name: str | None = None,
    tags: dict[str, str] | None = None,
) -> Iterator[str]:
    """Create or re-attach to a run; yield its id. ``$MLFLOW_RUN_ID`` is honoured.

    A run re-attached by ``run_id`` takes ``run_name``: resumed to more epochs, its name
    says so. A run injected through ``$MLFLOW_RUN_ID`` (KFP's task run) keeps the name
    its creator gave it: KFP finds a retried task's run by it.

    On an exception the run ends FAILED, so a resumed attempt can pick it up again.
    """
    uri = tracking_uri()
    mlflow.set_tracking_uri(uri)
    injected = os.environ.get("MLFLOW_RUN_ID") or None
    run_id = run_id or injected  # given here, MLflow leaves the variable for the children
    if run_id and run_id == injected:
        check_kfp_task_run(injected, tags or {})  # before anything is written into it
    if run_id:  # an existing run: its own experiment is the active one
        active = MlflowClient(uri).get_run(run_id).info.experiment_id
        mlflow.set_experiment(experiment_id=active)
    else:
        active = experiment_id(experiment)
    renamed = run_id is not None and run_id != injected and run_name is not None
    with mlflow.start_run(
        run_id=run_id,
        experiment_id=active,
        run_name=None if run_id else run_name,
        log_system_metrics=logs_system_metrics(),
    ) as run:
        if renamed and run.info.run_name != run_name:
            # resumed to a longer recipe: the runs table shows what the run now trains
            mlflow.set_tag("mlflow.runName", run_name)
        if tags:
            mlflow.set_tags(tags)
        log.info("MLflow run %s in experiment %s at %s", run.info.run_id, active, uri)
        yield run.info.run_id


def check_kfp_task_run(run_id: str, tags: dict[str, str]) -> None:
    """Refuse ``$MLFLOW_RUN_ID`` unless it is the run KFP's MLflow tracking made for this
    task: in ``$MLFLOW_EXPERIMENT_ID`` (both set together), nested under a KFP pipeline
    run's parent (at any depth: a loop's iterations nest under the loop's run), and still
    RUNNING, or this task's own earlier attempt (FAILED or KILLED, with ``tags``' KFP run
    and combination) on a retry. A leftover variable would write into another run.

    Raises:
        ValueError: any other run, in one line, before anything is written.
    """
    experiment = os.environ.get("MLFLOW_EXPERIMENT_ID")
    refused = f"refusing MLFLOW_RUN_ID={run_id[:64]!r}: expected the run KFP made for this task"
    if not experiment:
        raise ValueError(
            f"{refused}, which KFP sets with MLFLOW_EXPERIMENT_ID, found no "
            "MLFLOW_EXPERIMENT_ID; unset MLFLOW_RUN_ID to start a run of this step's own"
        )
    client = MlflowClient(tracking_uri())
    try:
        run = client.get_run(run_id)
    except MlflowException as err:
        if err.error_code in REGISTRY_ABSENT:
            raise ValueError(f"{refused}, found no such run at {tracking_uri()}") from None
        raise
    own = {k: tags[k] for k in (KFP_RUN_ID_TAG, COMBINATION_TAG) if k in tags}
    retried = (
        run.info.status in ("FAILED", "KILLED")
        and KFP_RUN_ID_TAG in own
        and all(run.data.tags.get(k) == v for k, v in own.items())
    )
    problems = [
        f"experiment {run.info.experiment_id}, not MLFLOW_EXPERIMENT_ID={experiment[:64]}"
        if run.info.experiment_id != experiment
        else "",
        f"a {run.info.status} run" if run.info.status != "RUNNING" and not retried else "",
        "" if _under_kfp_parent(client, run) else "not nested under a KFP pipeline run",
    ]
    found = "; ".join(problem for problem in problems if problem)
    if found:
        raise ValueError(
            f"{refused} (RUNNING, in MLFLOW_EXPERIMENT_ID, nested under a KFP pipeline run), "
            f"found {found}; unset MLFLOW_RUN_ID and MLFLOW_EXPERIMENT_ID to start a run of "
            "this step's own"
        )


def _under_kfp_parent(client: MlflowClient, run: Any, depth: int = 3) -> bool:
    """Whether ``run`` nests, within ``depth`` levels, under a run KFP made for a
    pipeline run (tagged ``kfp.pipeline_run_id``)."""
    for _ in range(depth):
        parent = run.data.tags.get(PARENT_TAG)
        if not parent:
            return False
        run = client.get_run(parent)
        if run.data.tags.get(KFP_PIPELINE_RUN_TAG):
            return True
    return False


def log_params_into(run_id: str, params: dict[str, object]) -> None:
    """Log ``params`` into a run that is not this process's active run."""
    client = MlflowClient(tracking_uri())
    for key, value in params.items():
        client.log_param(run_id, key, value)


def log_json_into(run_id: str, payload: dict[str, Any], name: str) -> None:
    """Log ``payload`` as the JSON artifact ``name`` of a run that is not this process's."""
    MlflowClient(tracking_uri()).log_dict(run_id, payload, name)


def log_params(params: dict[str, object]) -> None:
    mlflow.log_params({key: str(value) for key, value in params.items()})


def log_artifact(path: Path, artifact_path: str | None = None) -> None:
    mlflow.log_artifact(str(path), artifact_path)


def log_figure(figure: Figure, artifact_file: str) -> None:
    mlflow.log_figure(figure, artifact_file)


def log_metric(key: str, value: float) -> None:
    mlflow.log_metric(key, value)


def log_epoch(metrics: dict[str, float], epoch: int, checkpoint_sha256: str) -> str:
    """The epoch's metrics into the active run (``step=epoch``), linked to a new logged
    model for the epoch's checkpoint (``checkpoint``, MLflow 3's way) that records the
    checkpoint's digest, and which ``log_checkpoint`` fills once the checkpoint is
    written; the model's id.

    The metrics and the digest come first: a run stopped before its checkpoint is saved
    redoes the epoch, never loses its record, and a checkpoint on disk is always recorded.
    """
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("expected an active MLflow run to log the epoch into, found none")
    model = mlflow.initialize_logged_model(
        name=CHECKPOINT_MODEL,
        source_run_id=run.info.run_id,
        tags={EPOCH_TAG: str(epoch), f"{IDENTITY_TAG}{CHECKPOINT_FILE}": checkpoint_sha256},
        model_type="checkpoint",
    )
    mlflow.log_metrics(metrics, step=epoch, model_id=model.model_id)
    return model.model_id


def log_checkpoint(model_id: str, checkpoint: Path, epoch: int) -> None:
    """The checkpoint file into its model (``log_epoch``'s), the model ready and the run's
    output at ``step=epoch``, so the Models tab and ``search_logged_models`` rank the
    checkpoints by their metrics; then only the newest and the best are kept
    (``KEPT_CHECKPOINTS``)."""
    run = mlflow.active_run()
    if run is None:
        raise RuntimeError("expected an active MLflow run to log the checkpoint into")
    client = MlflowClient(tracking_uri())
    client.log_model_artifact(model_id, str(checkpoint))
    client.finalize_logged_model(model_id, LoggedModelStatus.READY)
    client.log_outputs(run.info.run_id, [LoggedModelOutput(model_id, step=epoch)])
    _prune_checkpoints(client, run.info.run_id, run.info.experiment_id)


def _checkpoint_models(
    client: MlflowClient, run_id: str, experiment_id: str, ready: bool = True
) -> list[Any]:
    """The run's checkpoint models (with ``ready``, those whose file is logged), newest
    epoch first."""
    found = client.search_logged_models(
        experiment_ids=[experiment_id],
        filter_string=f"source_run_id = '{run_id}' AND name = '{CHECKPOINT_MODEL}'",
    )
    kept = [
        m
        for m in found
        if (m.status == LoggedModelStatus.READY or not ready)
        and str(m.tags.get(EPOCH_TAG, "")).isdigit()
        and len(m.tags[EPOCH_TAG]) < 7
    ]
    return sorted(kept, key=lambda m: int(m.tags[EPOCH_TAG]), reverse=True)


def checkpoint_recorded(run_id: str, epoch: int, sha256: str) -> bool:
    """Whether run ``run_id`` recorded a checkpoint after ``epoch`` with digest ``sha256``."""
    client = MlflowClient(tracking_uri())
    models = _checkpoint_models(client, run_id, experiment_of(run_id), ready=False)
    tag = f"{IDENTITY_TAG}{CHECKPOINT_FILE}"
    return any(m.tags[EPOCH_TAG] == str(epoch) and m.tags.get(tag) == sha256 for m in models)


def _prune_checkpoints(client: MlflowClient, run_id: str, experiment_id: str) -> None:
    """Delete the run's checkpoints but the newest ``KEPT_CHECKPOINTS`` and the best by
    validation accuracy (of equals, the newest), their files with them: the store holds
    at most three a run."""
    models = _checkpoint_models(client, run_id, experiment_id)
    scores = {m.model_id: _metric(m, "val_accuracy") for m in models}
    best = max(models, key=lambda m: scores[m.model_id], default=None)
    for model in models[KEPT_CHECKPOINTS:]:
        if model is not best:
            get_artifact_repository(model.artifact_location).delete_artifacts()
            client.delete_logged_model(model.model_id)


def _metric(model: LoggedModel, key: str) -> float:
    values = [m.value for m in model.metrics or [] if m.key == key]
    return values[-1] if values else float("-inf")


def signature(example: np.ndarray, output: np.ndarray) -> ModelSignature:
    """Pixels in (N×C×S×S, 0–255), one logit column per class out, named in label order."""
    if output.shape[1:] != (len(CLASSES),):
        raise ValueError(f"expected {len(CLASSES)} logits an image, found shape {output.shape}")
    columns = Schema([ColSpec("float", f"logit_{name}") for name in CLASSES])
    return ModelSignature(inputs=infer_signature(example).inputs, outputs=columns)


def log_model(
    model: torch.nn.Module,
    example: np.ndarray,
    output_digests: dict[str, str],
    onnx_files: list[Path],
) -> str:
    """Log ``model`` with a signature and input example, and its ONNX graphs ``onnx_files``
    beside its MLmodel file; read it back, check it predicts, and record its identity.

    The identity (``record_identity``): ``output_digests`` (the train step's ``model.pt``
    and graphs, from the bytes it wrote) and the digest of every file of the logged model
    as read back. Returns the model URI.
    """
    import torch

    # a CPU copy with the weights in the default layout: torch.export's packaging does not
    # recognise channels-last weights as whole tensors (the input still runs channels-last)
    model = copy.deepcopy(model).cpu().eval().to(memory_format=torch.contiguous_format)
    with torch.no_grad():
        expected = model(torch.from_numpy(example)).numpy()
    info = mlflow.pytorch.log_model(
        model,
        name=MODEL_NAME,
        serialization_format="pt2",  # torch.export: loading it runs no pickle
        signature=signature(example, expected),
        input_example=example,
        metadata={"classes": list(CLASSES), "output": "logits, one column per class"},
        pip_requirements=[f"torch=={torch.__version__.split('+')[0]}", "numpy"],
    )
    for onnx_file in onnx_files:
        MlflowClient(tracking_uri()).log_model_artifact(info.model_id, str(onnx_file))
    with tempfile.TemporaryDirectory(prefix="logged-") as scratch:
        folder = download_model(info.model_uri, Path(scratch))
        logged = identity.folder_digests(folder)
        changed = [
            name
            for name in output_digests
            if logged.get(name, output_digests[name]) != output_digests[name]
        ]
        if changed:
            raise RuntimeError(f"the model logged at {info.model_uri} holds other {changed}")
        loaded = load_model(folder.as_uri())
        with torch.no_grad():
            again = loaded(torch.from_numpy(example)).numpy()
    if not np.allclose(again, expected, atol=1e-5):
        raise RuntimeError(f"the model logged at {info.model_uri} predicts differently on reload")
    record_identity(info.model_id, {**logged, **output_digests})
    return str(info.model_uri)


def record_identity(model_id: str, digests: dict[str, str]) -> None:
    """The digests of a logged model's files as its tags (``sha256.FILE``), in the
    tracking store: out of reach of whoever can write its artifacts."""
    tags = {f"{IDENTITY_TAG}{name}": digest for name, digest in digests.items()}
    MlflowClient(tracking_uri()).set_logged_model_tags(model_id, tags)


def recorded_identity(model_id: str) -> dict[str, str]:
    """The digests the tracking store records for logged model ``model_id``'s files.

    Raises:
        ModelIdentityError: it records none (a model logged without them).
    """
    tags = MlflowClient(tracking_uri()).get_logged_model(model_id).tags or {}
    found = {
        key.removeprefix(IDENTITY_TAG): value
        for key, value in tags.items()
        if key.startswith(IDENTITY_TAG)
    }
    if not found:
        raise identity.ModelIdentityError(
            f"MLflow model {model_id} at {tracking_uri()} records no digests of its files, so "
            "they cannot be checked and are not loaded; train it again"
        )
    return identity.parse_digests(found, f"MLflow model {model_id}'s tags")


def model_id_of(uri: str) -> str:
    """The logged model (``m-…``) a ``models:/`` or ``runs:/RUN/model`` URI names.

    Raises:
        ValueError: another kind of URI, whose files no tracking store vouches for.
    """
    mlflow.set_tracking_uri(tracking_uri())
    client = MlflowClient(tracking_uri())
    if uri.startswith("runs:/"):
        return logged_model_id(uri.removeprefix("runs:/").split("/")[0])
    reference = uri.removeprefix("models:/") if uri.startswith("models:/") else None
    if reference is None:
        raise ValueError(
            f"expected a model as models:/NAME@ALIAS, models:/NAME/VERSION or "
            f"runs:/RUN/model, whose files the tracking store records, found {uri!r:.200}"
        )
    if reference.startswith("m-") and "/" not in reference:
        return reference
    name, at, alias = reference.rpartition("@")
    if at:
        version = client.get_model_version_by_alias(name, alias)
    else:
        name, _, number = reference.rpartition("/")
        version = client.get_model_version(name, number)
    # MLflow's stores leave model_id empty; the version's source names the logged model
    source = str(version.source or "").removeprefix("models:/")
    model_id = version.model_id or (source if re.fullmatch(r"m-[0-9a-f]{32}", source) else None)
    if not model_id:
        raise identity.ModelIdentityError(
            f"{uri} names a model version registered from no logged model (its source is "
            f"{version.source!r:.200}); its files cannot be checked"
        )
    return str(model_id)


def logged_model_of(folder: Path) -> str:
    """The logged model (``m-…``) an MLflow model folder's MLmodel file says it is.

    Raises:
        ModelIdentityError: its MLmodel names none.
    """
    model_id = Model.load(str(folder / "MLmodel")).model_id
    if not isinstance(model_id, str) or not model_id.startswith("m-"):
        raise identity.ModelIdentityError(
            f"expected {identity.RECORD} in {folder}, or an MLmodel file naming the logged "
            f"model whose record the tracking store holds, found neither: the files cannot "
            "be checked, so they are not loaded"
        )
    return model_id


def download_verified(uri: str, folder: Path) -> tuple[Path, dict[str, str]]:
    """A logged or registered model's files into ``folder``, each checked against the
    digests the tracking store records for it; the folder that holds them, and the record.

    Raises:
        ModelIdentityError: a file that is not the one recorded.
    """
    model_id = model_id_of(uri)
    record = recorded_identity(model_id)
    where = download_model(uri, folder)
    reads = identity.folder_digests(where)
    identity.verify(where, record, reads, f"the tracking store (MLflow model {model_id})")
    return where, record


def find_run_by_tags(experiment: str, tags: dict[str, str]) -> str | None:
    """The newest run of ``experiment`` (KFP's, under its MLflow tracking) carrying every
    one of ``tags``, or None."""
    mlflow.set_tracking_uri(tracking_uri())
    task = kfp_task()
    found = mlflow.search_runs(
        experiment_ids=[task.experiment_id] if task else None,
        experiment_names=None if task else [experiment],
        filter_string=" AND ".join(f"tags.`{key}` = '{value}'" for key, value in tags.items()),
        order_by=["start_time DESC"],
        max_results=1,
        output_format="list",
    )
    return found[0].info.run_id if found else None


def download_checkpoint(run_id: str, destination: Path) -> Path | None:
    """Fetch the run's newest checkpoint (its checkpoint model's file) into
    ``destination``; None if it has none."""
    client = MlflowClient(tracking_uri())
    models = _checkpoint_models(client, run_id, client.get_run(run_id).info.experiment_id)
    if not models:
        return None
    destination.mkdir(parents=True, exist_ok=True)
    uri = f"{models[0].artifact_location.rstrip('/')}/{CHECKPOINT_FILE}"
    return Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(destination)))


def load_model(uri: str) -> torch.nn.Module:
    """Load a logged model by URI onto the CPU; a pickled model is refused, never run.

    Raises:
        mlflow.exceptions.MlflowException: the model is saved with pickle; a model
            from a registry or a bucket is untrusted, and unpickling it runs its code.
    """
    mlflow.set_tracking_uri(tracking_uri())
    with _pickle_refused():
        model: torch.nn.Module = mlflow.pytorch.load_model(uri, map_location="cpu")
        return model


@contextlib.contextmanager
def _pickle_refused() -> Iterator[None]:
    """MLflow's own switch against unpickling models, off (its default is on) for a block."""
    key = "MLFLOW_ALLOW_PICKLE_DESERIALIZATION"
    before = os.environ.get(key)
    os.environ[key] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = before


def download_model(uri: str, folder: Path) -> Path:
    """A logged or registered model's files into ``folder``, as MLflow resolves ``uri``;
    the folder that holds them: ``folder`` for ``models:/``, a folder in it named as the
    URI's last part for the others (``runs:/RUN/model``: ``folder/model``).

    Raises:
        ValueError: what arrived is not an MLflow model (no MLmodel file).
    """
    mlflow.set_tracking_uri(tracking_uri())
    where = Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(folder)))
    if not (where / "MLmodel").is_file():
        raise ValueError(f"expected an MLflow model at {uri}, found no MLmodel file in it")
    return where


def model_input_shape(uri: str) -> tuple[int, ...]:
    """The N×C×H×W input shape from a logged model's signature (N is -1)."""
    mlflow.set_tracking_uri(tracking_uri())
    parsed = urlparse(uri)
    if parsed.scheme == "file":  # a model's folder: its MLmodel file, no tracking server
        signature = Model.load(parsed.path).signature
    else:
        signature = mlflow.models.get_model_info(uri).signature
    inputs = signature.inputs.to_dict() if signature else []
    if len(inputs) != 1 or "tensor-spec" not in inputs[0]:
        raise ValueError(
            f"expected a model logged with the signature of one input tensor at {uri}, "
            f"found {inputs or 'no signature'}"
        )
    return tuple(inputs[0]["tensor-spec"]["shape"])


def use_tracking_uri(uri: str | None) -> None:
    """Make ``uri`` the tracking URI for this process and its children; empty keeps the default."""
    if uri:
        os.environ["MLFLOW_TRACKING_URI"] = uri
        tracking_uri()  # its credentials, if any, move to MLflow's own variables


def logged_model_id(run_id: str) -> str:
    """The id (``m-…``) of the model the run logged last.

    Raises:
        LookupError: the run logged no model.
    """
    client = MlflowClient(tracking_uri())
    run = client.get_run(run_id)
    found = client.search_logged_models(
        experiment_ids=[run.info.experiment_id],
        filter_string=f"source_run_id = '{run_id}' AND name = '{MODEL_NAME}'",
        order_by=[{"field_name": "creation_time", "ascending": False}],
        max_results=1,
    )
    if not found:
        raise LookupError(f"expected a model logged by MLflow run {run_id}, found none")
    return found[0].model_id


def log_source_input(source: dict[str, Any]) -> None:
    """Log the archive the photos came from (the download step's record: its URI, sha256
    and size) as an input of the active run, in context ``source``."""
    with warnings.catch_warnings():  # MLflow warns that a local path reads two ways
        warnings.simplefilter("ignore", UserWarning)
        origin = resolve_dataset_source(str(source["source"]))
    digest = str(source.get("sha256") or "unknown")[:8]
    # MLflow documents MetaDataset to be made so; its stubs leave `profile` abstract
    dataset = MetaDataset(origin, name="petimages-archive", digest=digest)  # type: ignore[abstract]
    mlflow.log_input(dataset, context="source", tags={"bytes": str(source.get("bytes"))})


def log_split_input(
    split: str, context: str, images: np.ndarray, labels: np.ndarray
) -> NumpyDataset:
    """Log one split of the ``.npy`` data as an input of the active run (an MLflow dataset
    named ``SPLIT-split``, with its digest and shape, in ``context``); the dataset."""
    dataset = from_numpy(images, targets=labels, name=f"{split}-split")
    mlflow.log_input(dataset, context=context)
    return dataset


def log_evaluation(
    split: str,
    metrics: dict[str, float],
    model_id: str,
    images: np.ndarray,
    labels: np.ndarray,
    prefix: str | None = None,
) -> None:
    """Log an evaluation's metrics into the active run, named ``prefix`` (the split's
    name by default) ``_accuracy`` and so on, linked to the logged model they were
    measured on and to the split's data (an MLflow dataset with its digest)."""
    dataset = log_split_input(split, split, images, labels)
    mlflow.log_metrics(
        {f"{prefix or split}_{key}": value for key, value in metrics.items()},
        model_id=model_id,
        dataset=dataset,
    )


def load_run_json(run_id: str, path: str) -> dict[str, Any] | None:
    """The run's JSON artifact at ``path``, or None where it has none."""
    client = MlflowClient(tracking_uri())
    folder, _, name = path.rpartition("/")
    if name not in {Path(a.path).name for a in client.list_artifacts(run_id, folder or None)}:
        return None
    mlflow.set_tracking_uri(tracking_uri())
    return mlflow.artifacts.load_dict(f"runs:/{run_id}/{path}")


def register_model(
    model_id: str, name: str, alias: str | None, description: str, tags: dict[str, str]
) -> str:
    """Register the logged model ``model_id`` under ``name`` with its model card
    (``description``, ``tags``), and point ``alias`` at it (None: no alias); the version."""
    mlflow.set_tracking_uri(tracking_uri())
    version = mlflow.register_model(f"models:/{model_id}", name, tags=tags)
    client = MlflowClient(tracking_uri())
    client.update_model_version(name, version.version, description=description)
    if alias:
        client.set_registered_model_alias(name, alias, version.version)
    return str(version.version)


# what the Model Registry answers for a name, alias or version it does not hold
REGISTRY_ABSENT = {"RESOURCE_DOES_NOT_EXIST", "INVALID_PARAMETER_VALUE"}


def check_registered(uri: str) -> None:
    """Refuse, at once, a ``models:/NAME@ALIAS`` or ``models:/NAME/VERSION`` that the
    registry does not hold, naming the models and aliases it does hold.

    Raises:
        LookupError: no such registered model, alias or version.
    """
    reference = uri.removeprefix("models:/")
    name, at, alias = reference.rpartition("@")
    if not at:
        name, slash, version = reference.rpartition("/")
        if not slash:
            return  # a logged model's id (models:/m-…): MLflow says what it finds
    client = MlflowClient(tracking_uri())
    held = {model.name: model for model in client.search_registered_models(max_results=100)}
    if name not in held:
        raise LookupError(
            f"no registered model {name!r} at {tracking_uri()}; registered: "
            + (", ".join(_described(m) for m in held.values()) or "none")
        )
    if at and alias not in (held[name].aliases or {}):
        missing = f"alias @{alias}"
    elif not at and not _has_version(client, name, version):
        missing = f"version {version!r}"
    else:
        return
    raise LookupError(f"registered model {name!r} has no {missing}: {_described(held[name])}")


def _has_version(client: MlflowClient, name: str, version: str) -> bool:
    try:
        client.get_model_version(name, version)
    except MlflowException as err:
        if err.error_code in REGISTRY_ABSENT:
            return False
        raise
    return True


def _described(model: RegisteredModel) -> str:
    """``NAME (@alias → version 1, …)``: a registered model and its aliases."""
    held = sorted((model.aliases or {}).items())
    aliases = ", ".join(f"@{alias} → version {version}" for alias, version in held)
    return f"{model.name} ({aliases or 'no aliases'})"


def alias_holder(name: str, alias: str) -> tuple[str, dict[str, str]] | None:
    """The version of registered model ``name`` that ``alias`` points at, and its tags;
    None when the model or the alias does not exist."""
    client = MlflowClient(tracking_uri())
    try:
        version = client.get_model_version_by_alias(name, alias)
    except MlflowException as err:
        if err.error_code in REGISTRY_ABSENT:
            return None
        raise
    return str(version.version), dict(version.tags)


def run_params(run_id: str) -> dict[str, str]:
    return dict(MlflowClient(tracking_uri()).get_run(run_id).data.params)


def input_digests(run_id: str) -> dict[str, str]:
    """The digest of each dataset the run logged as an input, by the dataset's name."""
    inputs = MlflowClient(tracking_uri()).get_run(run_id).inputs
    return {d.dataset.name: d.dataset.digest for d in (inputs.dataset_inputs if inputs else [])}


def create_run(experiment: str, run_name: str, tags: dict[str, str]) -> str:
    """A new run, left open for others to fill and end (a sweep's parent); its id."""
    mlflow.set_tracking_uri(tracking_uri())
    client = MlflowClient(tracking_uri())
    run = client.create_run(experiment_id(experiment), run_name=run_name, tags=tags)
    return str(run.info.run_id)


def finish_run(
    run_id: str, metrics: dict[str, float], tags: dict[str, str], status: str | None = "FINISHED"
) -> None:
    """Log ``metrics`` and ``tags`` into a run and end it with ``status`` (or KILLED,
    FAILED); ``None`` leaves it to its owner (KFP ends the runs it made)."""
    client = MlflowClient(tracking_uri())
    for key, value in metrics.items():
        client.log_metric(run_id, key, value)
    for key, text in tags.items():
        client.set_tag(run_id, key, text)
    if status:
        client.set_terminated(run_id, status)


def run_metrics(run_id: str) -> dict[str, float]:
    """The run's metrics, each at its latest step."""
    return dict(MlflowClient(tracking_uri()).get_run(run_id).data.metrics)


def best_run(run_ids: list[str], metric: str) -> tuple[str, float]:
    """The run with the highest latest ``metric``, and that value; ties: the larger id,
    a stable choice."""
    scores = {run_id: run_metrics(run_id)[metric] for run_id in run_ids}
    best = max(run_ids, key=lambda run_id: (scores[run_id], run_id))
    return best, scores[best]


def experiment_of(run_id: str) -> str:
    """The id of the run's experiment."""
    return MlflowClient(tracking_uri()).get_run(run_id).info.experiment_id


def run_identity(run_id: str) -> tuple[str, dict[str, str], dict[str, str]] | None:
    """The run's experiment name, tags and params; None when the store has no such run."""
    client = MlflowClient(tracking_uri())
    try:
        run = client.get_run(run_id)
    except MlflowException as err:
        if err.error_code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise
    experiment = client.get_experiment(run.info.experiment_id).name
    return experiment, dict(run.data.tags), dict(run.data.params)


def run_tag(run_id: str, key: str) -> str | None:
    """The value of the run's tag ``key``, or None."""
    return MlflowClient(tracking_uri()).get_run(run_id).data.tags.get(key)


def set_run_tags(run_id: str, tags: dict[str, str]) -> None:
    client = MlflowClient(tracking_uri())
    for key, value in tags.items():
        client.set_tag(run_id, key, value)


def use_experiment(name: str) -> str:
    """Make ``name`` the active experiment, created first where missing; its id.

    On a SQLite store its artifacts go beside the database (``mlartifacts/`` there), as
    ``python -m pipeline run --local`` puts them, never into the working directory's
    ``./mlruns``, where MLflow would put them; a tracking server says where itself.
    """
    uri = tracking_uri()
    if uri.startswith("sqlite:///"):
        database = Path(uri.removeprefix("sqlite:///")).resolve()
        ensure_experiment(name, database.parent / "mlartifacts")
    return mlflow.set_experiment(name).experiment_id


def ensure_experiment(name: str, artifact_location: Path) -> None:
    """Create experiment ``name`` with its artifacts at ``artifact_location``, unless it exists."""
    client = MlflowClient(tracking_uri())
    if client.get_experiment_by_name(name) is None:
        client.create_experiment(name, artifact_location=Path(artifact_location).as_uri())
