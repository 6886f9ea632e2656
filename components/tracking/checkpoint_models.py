"""Each epoch's checkpoint as an MLflow logged model: its digest recorded before the file is
written, the newest and the best kept, the newest found again for a resume.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
from mlflow.entities import LoggedModel, LoggedModelOutput, LoggedModelStatus
from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository
from mlflow.tracking import MlflowClient

from components.tracking import store
from components.tracking.run_log import experiment_of
from components.tracking.tags import IDENTITY_TAG

CHECKPOINT_MODEL = "checkpoint"  # the logged model each epoch's checkpoint is

CHECKPOINT_FILE = "checkpoint.pt"

EPOCH_TAG = "epoch"  # on a checkpoint model: the epoch it ends

KEPT_CHECKPOINTS = 2  # the newest checkpoints a run keeps, and the best besides


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
    client = store.client()
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
    client = store.client()
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


def download_checkpoint(run_id: str, destination: Path) -> Path | None:
    """Fetch the run's newest checkpoint (its checkpoint model's file) into
    ``destination``; None if it has none."""
    client = store.client()
    models = _checkpoint_models(client, run_id, client.get_run(run_id).info.experiment_id)
    if not models:
        return None
    destination.mkdir(parents=True, exist_ok=True)
    uri = f"{models[0].artifact_location.rstrip('/')}/{CHECKPOINT_FILE}"
    return Path(mlflow.artifacts.download_artifacts(artifact_uri=uri, dst_path=str(destination)))
