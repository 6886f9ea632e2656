"""Checkpoints: written atomically beside the model, copied to a durable store, found again."""

from __future__ import annotations

import io
import logging
import os
import shlex
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import torch

from components.core import s3, schema
from components.core.atomic import atomic_file
from components.core.identity import ModelIdentityError, sha256_of
from components.core.schema import RECIPE
from components.networks.models import load_tensors
from components.tracking import checkpoint_models, run_log
from components.tracking.store import tracking_uri
from components.tracking.tags import COMBINATION_TAG, KFP_RUN_ID_TAG, OUTPUT_TAG, STORE_TAG
from components.training.config import TrainConfig
from components.training.loop import Learner

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"
STATE_KEYS = ("model", "optimizer", "scheduler", "epoch", "history", "config", "mlflow_run_id")


def serialize(state: dict[str, Any]) -> bytes:
    """``state`` as ``torch.save`` writes it: the bytes a checkpoint's digest is of."""
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def save_checkpoint(checkpoint: bytes, path: Path) -> None:
    """Write a serialized checkpoint to ``path``, atomically."""
    with atomic_file(path) as handle:
        handle.write(checkpoint)


def load_checkpoint(path: Path, source: str | None = None) -> dict[str, Any]:
    """Read a checkpoint onto the CPU; only tensors and plain data, never code.

    Raises:
        ValueError: the file is not a checkpoint the train step wrote; the message
            names ``source`` (where it was fetched from), else ``path``.
    """
    state = load_tensors(path, f"{source or path}, a checkpoint from the train step")
    if not (isinstance(state, dict) and _holds_a_training_state(state)):
        found = list(state) if isinstance(state, dict) else type(state).__name__
        raise ValueError(
            f"expected a checkpoint from the train step in {source or path} "
            f"({', '.join(STATE_KEYS)}; epoch = the history's length, one record an epoch), "
            f"found {found!r:.300}"
        )
    return state


def _holds_a_training_state(state: dict[str, Any]) -> bool:
    return (
        all(key in state for key in STATE_KEYS)
        and isinstance(state["config"], dict)
        and isinstance(state["history"], list)
        and state["epoch"] == len(state["history"])
        and all(
            isinstance(entry, dict) and entry.get("epoch") == epoch
            for epoch, entry in enumerate(state["history"], start=1)
        )
    )


class CheckpointStore:
    """A durable copy of the newest checkpoint, under an ``s3://`` prefix or a directory.

    The pod's own disk is gone when a retried pipeline task starts again; this is not.
    """

    def __init__(self, uri: str):
        self.uri = uri.rstrip("/")
        parsed = urlparse(self.uri)
        self._bucket, self._key = (parsed.netloc, f"{parsed.path.strip('/')}/{CHECKPOINT}")
        self._is_s3 = parsed.scheme == "s3"

    def put(self, local: Path) -> None:
        if self._is_s3:
            self._client().upload_file(str(local), self._bucket, self._key)
            return
        target = Path(self.uri) / CHECKPOINT
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(target) as handle, open(local, "rb") as source:
            shutil.copyfileobj(source, handle)

    def fetch(self, destination: Path) -> bool:
        """Copy the stored checkpoint to ``destination``; False when there is none yet."""
        if self._is_s3:
            from botocore.exceptions import ClientError

            try:
                self._client().download_file(self._bucket, self._key, str(destination))
            except ClientError as err:
                if err.response["Error"]["Code"] in ("404", "NoSuchKey"):
                    return False
                raise
            return True
        source = Path(self.uri) / CHECKPOINT
        if not source.is_file():
            return False
        shutil.copyfile(source, destination)
        return True

    def _client(self) -> Any:
        return s3.client()


def save_everywhere(cfg: TrainConfig, checkpoint: bytes) -> Path:
    """The rolling checkpoint in the output, then in the store; its path (the MLflow run
    gets it as the epoch's checkpoint model, ``checkpoint_models.log_checkpoint``)."""
    path = Path(cfg.output) / CHECKPOINT
    save_checkpoint(checkpoint, path)
    if cfg.checkpoint_uri:
        CheckpointStore(cfg.checkpoint_uri).put(path)
    return path


def training_state(
    cfg: TrainConfig,
    meta: dict[str, Any],
    learner: Learner,
    history: list[dict[str, Any]],
    run_id: str | None,
) -> dict[str, Any]:
    """What a checkpoint holds: the weights, optimiser and schedule, the history, the
    recipe and the MLflow run that trains it."""
    return {
        "data_shape": _data_shape(meta),
        "model": learner.model.state_dict(),
        "optimizer": learner.optimizer.state_dict(),
        "scheduler": learner.scheduler.state_dict(),
        "epoch": len(history),
        "rng": {"seed": cfg.seed, "next_epoch": len(history) + 1},
        "history": history,
        "config": asdict(cfg),
        "mlflow_run_id": run_id,
    }


def find_checkpoint(cfg: TrainConfig, meta: dict[str, Any]) -> dict[str, Any] | None:
    """The newest checkpoint in the output directory, the store, or this run's MLflow run.

    Raises:
        ValueError: the newest checkpoint was trained with a recipe or on images this
            run cannot continue, or names an MLflow run this training did not create.
    """
    found = max(_candidates(cfg), key=lambda candidate: candidate[0]["epoch"], default=None)
    if found is None:  # INFO: a pipeline task's first attempt resumes too, and finds none
        log.info(
            "--resume found no checkpoint in %s, the checkpoint store or the MLflow run: "
            "starting a new run at epoch 1",
            cfg.output,
        )
        return None
    state, sha256, source = found
    check_resumable(state, cfg, meta)
    check_own_run(state, cfg)  # after check_resumable, whose check it relies on
    check_recorded(state, sha256, source)
    log.info("resuming after epoch %d (MLflow run %s)", state["epoch"], state["mlflow_run_id"])
    return state


def restore(state: dict[str, Any], learner: Learner) -> None:
    """Load a checkpoint's weights, optimiser and schedule into ``learner``.

    Raises:
        ValueError: the checkpoint's state does not fit this run's net or optimiser.
    """
    try:
        learner.model.load_state_dict(state["model"])
        learner.optimizer.load_state_dict(state["optimizer"])
        learner.scheduler.load_state_dict(state["scheduler"])
    except (RuntimeError, ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"cannot resume from the checkpoint after epoch {state['epoch']}: its state "
            f"does not fit this run's net, optimiser or data ({err!s:.500})"
        ) from err


def check_recorded(state: dict[str, Any], sha256: str, source: str) -> None:
    """Refuse a checkpoint whose digest the MLflow run it names never recorded.

    Each epoch's checkpoint model records the digest of the checkpoint written after it
    (``checkpoint_models.log_epoch``), so a checkpoint edited, or another run's relabelled, is no
    checkpoint of the run it names.

    Raises:
        ModelIdentityError: no such record, or a checkpoint that names no run.
    """
    run_id, epoch = state["mlflow_run_id"], state["epoch"]
    if run_id is None or not checkpoint_models.checkpoint_recorded(run_id, epoch, sha256):
        raise ModelIdentityError(
            f"cannot resume from {source}: MLflow run {run_id} recorded no checkpoint after "
            f"epoch {epoch} with its sha256 {sha256[:16]}…, so it is not a checkpoint that "
            "run wrote; start without --resume"
        )


def _candidates(cfg: TrainConfig) -> Iterator[tuple[dict[str, Any], str, str]]:
    """Each checkpoint found, with its sha256 and where it was found."""
    local = Path(cfg.output) / CHECKPOINT
    if local.is_symlink() or (local.exists() and not local.is_file()):
        kind = (
            "a link" if local.is_symlink() else "a folder" if local.is_dir() else "a special file"
        )
        raise ValueError(
            f"cannot resume: expected {local} to be the checkpoint file the train step "
            f"wrote, found {kind}; remove it, or start without --resume"
        )
    if local.is_file():
        yield load_checkpoint(local), sha256_of(local), str(local)
    run_id = cfg.mlflow_run_id or (
        cfg.kfp_run_id and run_log.find_run_by_tags(cfg.experiment, identity_tags(cfg))
    )
    with tempfile.TemporaryDirectory() as scratch:  # private to this run, removed after
        fetched = Path(scratch) / CHECKPOINT
        store = CheckpointStore(cfg.checkpoint_uri) if cfg.checkpoint_uri else None
        if store and store.fetch(fetched):
            where = f"{store.uri}/{CHECKPOINT}"
            yield load_checkpoint(fetched, where), sha256_of(fetched), where
        if run_id and (
            path := checkpoint_models.download_checkpoint(run_id, Path(scratch) / "mlflow")
        ):
            where = f"MLflow run {run_id}'s {CHECKPOINT}"
            yield load_checkpoint(path, where), sha256_of(path), where


def check_own_run(state: dict[str, Any], cfg: TrainConfig) -> None:
    """Refuse a checkpoint whose MLflow run is not the one this output's training created.

    The run a checkpoint names is continued, so a checkpoint edited to name another run
    would take it over. It must be the run given with ``--mlflow-run-id``; else it must
    exist in this run's experiment, carry this training's identity (the KFP run, and a
    sweep child's combination; outside a pipeline, this output folder) and have been
    started with the checkpoint's recipe.

    Raises:
        ValueError: the checkpoint names another run, or one that does not exist.
    """
    run_id = state["mlflow_run_id"]
    if run_id is None or run_id == cfg.mlflow_run_id:
        return
    refused = f"cannot resume: the checkpoint names MLflow run {run_id!r}"
    if cfg.mlflow_run_id:
        raise ValueError(f"{refused}, not the run given, {cfg.mlflow_run_id}")
    found = run_log.run_identity(run_id)
    if found is None:
        raise ValueError(f"{refused}, which does not exist at {tracking_uri()}")
    experiment, tags, params = found
    # this training: its KFP run (and combination); outside a pipeline, its output folder
    # or its durable store (a lost pod's successor writes another folder)
    identities = [identity_tags(cfg)] if cfg.kfp_run_id else []
    identities += [{OUTPUT_TAG: os.path.abspath(cfg.output)}]
    if cfg.checkpoint_uri:
        identities.append({STORE_TAG: cfg.checkpoint_uri})
    ours = any(all(tags.get(k) == v for k, v in tags_.items()) for tags_ in identities)
    if experiment != cfg.experiment or not ours:
        raise ValueError(
            f"{refused}, which this training did not create (its experiment {experiment!r}, "
            f"its output {tags.get(OUTPUT_TAG)!r}); start without --resume, or "
            "give --mlflow-run-id to continue that run"
        )
    # the checkpoint's recipe is this run's (check_resumable), so the run's params must be too
    changed = [
        name
        for name, value in schema.params(cfg).items()
        if name != "epochs" and name in params and params[name] != str(value)
    ]
    if changed:
        raise ValueError(f"{refused}, whose params differ from the checkpoint's: {changed}")


def identity_tags(cfg: TrainConfig) -> dict[str, str]:
    """The tags that find a KFP task's MLflow run again when the task is retried.

    The KFP run id, and in a sweep the child's combination: every child of a sweep
    shares the KFP run.
    """
    tags = {KFP_RUN_ID_TAG: cfg.kfp_run_id, COMBINATION_TAG: cfg.combination}
    return {key: value for key, value in tags.items() if value}


def _data_shape(meta: dict[str, Any]) -> list[int]:
    """The images' channels and side, as ``meta.json`` gives them."""
    return [meta["channels"], meta["image_size"]]


def check_resumable(state: dict[str, Any], cfg: TrainConfig, meta: dict[str, Any]) -> None:
    """Refuse to resume ``state`` for ``cfg`` unless the data's shape and the whole recipe
    (every ``RECIPE`` field of the schema; ``epochs`` may grow on a constant schedule,
    never shrink below the epochs trained) are the checkpoint's."""
    # checkpoints written before the data's shape was saved carry none
    saved_shape = state.get("data_shape", _data_shape(meta))
    if saved_shape != _data_shape(meta):
        raise ValueError(
            f"cannot resume: the checkpoint was trained on images of channels × side "
            f"{saved_shape}, the arrays in {cfg.data} are {_data_shape(meta)}"
        )
    saved = state["config"]
    if cfg.epochs < state["epoch"]:
        raise ValueError(
            f"cannot resume: the checkpoint has {state['epoch']} epochs trained, this run asks "
            f"for epochs={cfg.epochs}; resume with epochs={state['epoch']} or more, or start "
            "without --resume"
        )
    for field in schema.fields_of(TrainConfig, RECIPE):
        if field.name == "epochs" and cfg.schedule != "onecycle":
            continue  # a constant schedule may be extended; one-cycle's length is fixed
        # a checkpoint written before a recipe field existed trained with its default
        was, now = saved.get(field.name, field.default), getattr(cfg, field.name)
        if was != now:
            raise ValueError(
                f"cannot resume: the checkpoint has {field.name}={was!r}, "
                f"this run asks for {field.name}={now!r}"
            )


def resume_hint(cfg: TrainConfig, argv: list[str]) -> str:
    """What a stopped run (Ctrl-C, SIGTERM) leaves, and the train command that continues it."""
    if not (Path(cfg.output) / CHECKPOINT).is_file():
        return "stopped before the first checkpoint: nothing to resume; run the command again"
    again = shlex.join(["python", "-m", "components.train", *argv])
    again += "" if cfg.resume else " --resume"
    return f"stopped: its MLflow run ended KILLED; continue from its last checkpoint with: {again}"
