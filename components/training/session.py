"""A training run: data onto the device, epochs, checkpoints, the model, all tracked in MLflow.

The logic behind ``python -m components.train``; it imports torch and mlflow, which the
command line loads only once its flags are parsed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from components.core import identity, schema
from components.core.atomic import atomic_file, claim_directory, exclusive, write_json
from components.core.identity import sha256_of_bytes
from components.core.memory import memory_limit
from components.core.names import (
    HISTORY_FILE,
    INT8_FILE,
    ONNX_FILE,
    RUN_ID_FILE,
    SPEC_FILE,
    WEIGHTS_FILE,
)
from components.data.arrays import photo_shape, read_meta, shards_digest, split_file_sha256
from components.data.classes import metric_keys
from components.networks import pretrained
from components.networks.backbones import BACKBONES
from components.networks.models import Classifier, OneBatchOfViews, build_model, save_trained
from components.scoring.scorers import CPU_BATCH
from components.tracking import checkpoint_models, kfp_tracking, logged_models, run_log, store
from components.tracking.tags import (
    DIVERGED_TAG,
    EPOCHS_TAG,
    GRID_SEARCH,
    KFP_PIPELINE_TAG,
    KFP_RUN_ID_TAG,
    LISTING_DIGEST_PARAM,
    OUTPUT_TAG,
    PARENT_TAG,
    SEARCH_TAG,
    SOURCE_LISTING_PARAM,
    STORE_TAG,
    TEST_FRACTION_PARAM,
    TEST_SPLIT_PARAM,
    TRIAL_TAG,
)
from components.training import checkpoints, frozen_features, linear_probe, runtime
from components.training.batches import DeviceSplit
from components.training.config import TrainConfig
from components.training.loop import DivergedError, new_learner, run_epoch
from components.training.onnx_graph import OnnxGraph
from components.training.runtime import Workers

log = logging.getLogger(__name__)

EpochHook = Callable[[int, dict[str, float]], None]
OUTPUT_FILES = [
    WEIGHTS_FILE,
    SPEC_FILE,
    identity.RECORD,
    ONNX_FILE,
    INT8_FILE,
    checkpoints.CHECKPOINT,
    HISTORY_FILE,
    RUN_ID_FILE,
]
CHECKED_PHOTOS = 64  # val photos on which ONNX Runtime must give eager torch's answers


@dataclass(frozen=True)
class TrainResult:
    """What a training run hands back; ``run_id`` and ``model_uri`` are None on ranks > 0."""

    run_id: str | None
    history: list[dict[str, Any]]
    model_uri: str | None


def train(cfg: TrainConfig, on_epoch: EpochHook | None = None) -> TrainResult:
    """Train, checkpointing each epoch; resume from the newest checkpoint with ``cfg.resume``.

    Runs unchanged under ``torchrun``: each rank trains on its share of every global
    batch, and rank 0 alone logs, checkpoints and writes the model.

    Args:
        cfg: the recipe and where this run reads and writes.
        on_epoch: called on rank 0 with each epoch's number and metrics once they are
            logged and checkpointed (a search's pruner); what it raises ends the run.

    Returns:
        The MLflow run id, the per-epoch history and the logged model's URI.
    """
    workers, device = runtime.start(cfg.device)
    try:
        # rank 0 writes the output: a second run into it at once is refused
        held = exclusive(Path(cfg.output), "train") if workers.is_main else contextlib.nullcontext()
        with held:
            return _train(cfg, workers, device, on_epoch)
    finally:
        runtime.stop(workers)


def _train(
    cfg: TrainConfig, workers: Workers, device: torch.device, on_epoch: EpochHook | None
) -> TrainResult:
    if workers.is_main:
        _refuse_a_trained_output(cfg)
        store.check_server()  # before any time goes into training
        if cfg.mlflow_run_id and cfg.mlflow_run_id != os.environ.get("MLFLOW_RUN_ID"):
            kfp_tracking.check_given_run(cfg.mlflow_run_id, cfg.experiment, cfg.output)
        claim_directory(Path(cfg.output), "train", OUTPUT_FILES)
        if cfg.resume and cfg.kfp_run_id:
            _refuse_a_retry_that_diverged(cfg)
    if cfg.batch_size % workers.world_size:
        raise ValueError(
            f"expected a batch size divisible by the {workers.world_size} "
            f"processes, found {cfg.batch_size}"
        )
    meta = read_meta(Path(cfg.data))
    _refuse_a_start_size_the_net_cannot_take(cfg, meta)
    # the checkpoint is checked before the data loads and anything trains
    found = checkpoints.find_checkpoint(cfg, meta) if cfg.resume and workers.is_main else None
    finished = runtime.share(workers, _finished_model_uri(cfg, found) if found else None)
    if finished:  # --resume of a run that trained to its end: nothing to train or log
        run_id = found["mlflow_run_id"] if found else None
        log.info("nothing to resume: MLflow run %s trained all %d epochs; its model is %s",
                 run_id, cfg.epochs, finished)  # fmt: skip
        return TrainResult(run_id, found["history"] if found else [], finished)
    budget = cfg.memory_budget_mb * 2**20 or memory_limit() // 4
    val_data = DeviceSplit.load(Path(cfg.data), "val", device, budget)
    budget -= val_data.resident_bytes
    train_data = DeviceSplit.load(
        Path(cfg.data), "train", device, budget, cfg.train_photos, cfg.seed
    )
    learner = new_learner(cfg, meta, workers, device, math.ceil(len(train_data) / cfg.batch_size))
    model = learner.model
    state = runtime.share(workers, found)
    if state:
        checkpoints.restore(state, learner)
    history = state["history"] if state else []
    run_id = state["mlflow_run_id"] if state else cfg.mlflow_run_id
    tracked = (
        run_log.start_run(
            cfg.experiment, run_id=run_id, run_name=run_name(cfg, meta), tags=_tags(cfg)
        )
        if workers.is_main
        else contextlib.nullcontext(None)
    )
    with tracked as run_id:
        if workers.is_main and not state:
            test_split = split_file_sha256(Path(cfg.data), "test")  # what evaluate must score
            run_log.log_params({**run_params(cfg, meta), TEST_SPLIT_PARAM: test_split})
            if meta.get("source"):
                run_log.log_source_input(meta["source"])
            for split, context in (("train", "train"), ("val", "validation")):
                dataset = run_log.split_dataset(
                    split, Path(cfg.data), shards_digest(meta, split), photo_shape(meta)
                )
                run_log.log_split_input(context, dataset, sum(meta["counts"][split].values()))
        if run_id and state and cfg.epochs != state["config"]["epochs"]:  # rank 0 only
            run_log.set_run_tags(run_id, {EPOCHS_TAG: _extension(cfg, state)})
        # in the run: a long pass over the photos has a run to watch from its start
        fitted = (train_data, val_data)  # what the epochs train on and score: photos or features
        if cfg.cached_views:
            fitted = frozen_features.cache_splits(
                model, train_data, val_data, cfg.cached_views, cfg.amp
            )
        if cfg.probe_photos and not state:  # from the cached features where there are
            _fit_the_classifier_first(cfg, model, fitted[0], workers)
        for epoch in range(len(history) + 1, cfg.epochs + 1):
            try:
                metrics = run_epoch(learner, *fitted, cfg, epoch, workers)
            except DivergedError as err:
                if run_id:  # rank 0: a retry of this KFP run reads it and stops at once
                    run_log.set_run_tags(run_id, {DIVERGED_TAG: str(err)})
                raise
            history.append({"epoch": epoch, **metrics})
            if workers.is_main:
                state = checkpoints.training_state(cfg, meta, learner, history, run_id)
                checkpoint = checkpoints.serialize(state)
                model_id = checkpoint_models.log_epoch(metrics, epoch, sha256_of_bytes(checkpoint))
                saved = checkpoints.save_everywhere(cfg, checkpoint)
                if cfg.overwrite:  # replaced once this run has a checkpoint, never mixed
                    _remove_earlier_outputs(Path(cfg.output))
                checkpoint_models.log_checkpoint(model_id, saved, epoch)
                if on_epoch:
                    on_epoch(epoch, metrics)
            if cfg.dry_run:
                break
        if workers.is_main:  # saving and logging the model can take half a minute
            log.info("training done; saving the model to %s and logging it to MLflow", cfg.output)
        graph = learner.onnx or OnnxGraph()
        model_uri = (
            _write_outputs(cfg, model, graph, (train_data, val_data), meta, history, run_id)
            if workers.is_main
            else None
        )
    return TrainResult(run_id, history, model_uri)


def _fit_the_classifier_first(
    cfg: TrainConfig, model: Classifier, train_data: DeviceSplit, workers: Workers
) -> None:
    """A linear probe on rank 0 (``linear_probe``), its classifier then on every rank."""
    head = {}
    if workers.is_main:
        head = linear_probe.fit_classifier(model, train_data.pick(cfg.probe_photos, cfg.seed))
    linear_probe.set_classifier(model, runtime.share(workers, head))


def _finished_model_uri(cfg: TrainConfig, state: dict[str, Any]) -> str | None:
    """The logged model of a checkpoint's run that trained all of ``cfg.epochs`` and wrote
    its model into the output; None where resuming has work left."""
    if len(state["history"]) < cfg.epochs or not (Path(cfg.output) / WEIGHTS_FILE).is_file():
        return None
    try:
        return f"models:/{logged_models.logged_model_id(state['mlflow_run_id'])}"
    except LookupError:  # stopped while it logged its model: resuming logs it
        return None


def _remove_earlier_outputs(output: Path) -> None:
    """An earlier run's files in ``output``, but the checkpoint this run has just written
    over its own: the model and its graphs come at this run's end, written afresh."""
    for name in OUTPUT_FILES:
        if name != checkpoints.CHECKPOINT:
            (output / name).unlink(missing_ok=True)


def _refuse_a_trained_output(cfg: TrainConfig) -> None:
    """Refuse to train afresh over a model or a checkpoint that an earlier run left in
    ``cfg.output``, unless told to continue it (``resume``) or replace it (``overwrite``).

    Raises:
        FileExistsError: the output holds one, with the commands that continue or replace it.
    """
    output = Path(cfg.output)
    held = [name for name in (WEIGHTS_FILE, checkpoints.CHECKPOINT) if (output / name).is_file()]
    if not held or cfg.resume or cfg.overwrite:
        return
    run_file = output / RUN_ID_FILE
    run_id = run_file.read_text().strip()[:64] if run_file.is_file() else None
    earlier = f" (MLflow run {run_id})" if run_id else ""
    raise FileExistsError(
        f"refusing to train afresh into {output}: it holds {' and '.join(held)} of an earlier "
        f"run{earlier}, left as it is; give --resume to continue it, --overwrite to replace "
        "it, or another --output"
    )


def _refuse_a_start_size_the_net_cannot_take(cfg: TrainConfig, meta: dict[str, Any]) -> None:
    """Progressive resizing's first side: at most the data's, and one the net can take."""
    if not cfg.start_size:
        return
    side, channels = meta["image_size"], meta["channels"]
    if cfg.start_size > side:
        raise ValueError(
            f"expected a start size of at most the data's side ({side}), found {cfg.start_size}"
        )
    net = build_model(cfg.model, channels, side, len(meta["classes"])).eval()
    try:
        with torch.no_grad():
            net(torch.zeros(1, channels, cfg.start_size, cfg.start_size))
    except RuntimeError:
        raise ValueError(
            f"expected a start size {cfg.model} can take, found {cfg.start_size}: it fails "
            f"on {cfg.start_size}×{cfg.start_size} photos (tutorial_cnn takes only its own "
            "side; the residual nets at least 32)"
        ) from None


def _refuse_a_retry_that_diverged(cfg: TrainConfig) -> None:
    """Fail at once when an earlier attempt of this KFP run stopped at a non-finite loss.

    KFP retries a failed task whatever the cause; resumed from the same checkpoint with
    the same recipe, the retry would only spend its epochs diverging again.

    Raises:
        DivergedError: the KFP run's MLflow run records a divergence.
    """
    run_id = cfg.mlflow_run_id or run_log.find_run_by_tags(
        cfg.experiment, checkpoints.identity_tags(cfg)
    )
    reason = run_id and run_log.run_tag(run_id, DIVERGED_TAG)
    if reason:
        raise DivergedError(
            f"not retrying: an earlier attempt of KFP run {cfg.kfp_run_id} stopped ({reason}); "
            "resumed from the same checkpoint with the same recipe it would stop again. "
            "Start a new run with a lower --lr or another --schedule"
        )


def _extension(cfg: TrainConfig, state: dict[str, Any]) -> str:
    """What a resumed run that trains to more epochs records: its params cannot change."""
    was = state["config"]["epochs"]
    return f"{cfg.epochs} (param epochs={was}; resumed after epoch {state['epoch']})"


def run_name(cfg: TrainConfig, meta: dict[str, Any]) -> str:
    """The MLflow run's name, leading with what tells runs apart in the runs table: the
    recipe (its preset or file, else the net and its epochs), the data (the source's
    file name), the split seed, then the training seed: ``pretrained petimages-23k
    split0 seed0``."""
    recipe = cfg.recipe_name or f"{cfg.model}-{cfg.epochs}ep"
    split_seed = meta.get("config", {}).get("split_seed")
    split = "" if split_seed is None else f" split{split_seed}"
    name = f"{recipe} {data_name(cfg, meta)}{split} seed{cfg.seed}"
    if cfg.combination:  # a sweep's child: what it varies, e.g. "lr=0.003"
        varied = json.loads(cfg.combination)
        name += " " + " ".join(f"{key}={value}" for key, value in varied.items())
    if cfg.trial:  # a search's trial: which one
        name += f" {cfg.trial}"
    return name


def data_name(cfg: TrainConfig, meta: dict[str, Any]) -> str:
    """The photos' name: the file name of the source preprocess read, its archive suffix
    dropped (``petimages-23k``), else the arrays' folder name."""
    source = str((meta.get("source") or {}).get("source", "")).rstrip("/")
    name = source.rsplit("/", 1)[-1] or Path(cfg.data).name
    for suffix in (".zip", ".tar.gz", ".tgz", ".tar"):
        name = name.removesuffix(suffix)
    return name


def run_params(cfg: TrainConfig, meta: dict[str, Any]) -> dict[str, object]:
    """The run's MLflow params: the recipe, the dataset's shape, its classes (as JSON) and
    their counts in each split (``data_test_cat``)."""
    params = schema.params(cfg)
    params.update(image_size=meta["image_size"], channels=meta["channels"])
    if "photos_sha256" in meta:  # which photos each split holds, at any size
        params.update(
            {f"data_{split}_photos_sha256": d for split, d in meta["photos_sha256"].items()}
        )
    if cfg.model in BACKBONES:
        params.update(pretrained.record(cfg.model))
    source = meta.get("source") or {}
    if source.get("listing_run"):  # the test split's source listing, and its share
        params[SOURCE_LISTING_PARAM] = source["listing_run"]
        params[LISTING_DIGEST_PARAM] = source.get("listing")
        params[TEST_FRACTION_PARAM] = meta["config"]["test_fraction"]
    classes = meta["classes"]
    params.update(data_classes=json.dumps(classes, ensure_ascii=False))
    for split, counts in meta["counts"].items():
        keys = metric_keys(classes)
        params.update(
            {f"data_{split}_{key}": counts[name] for name, key in zip(classes, keys, strict=True)}
        )
    return params


def _tags(cfg: TrainConfig) -> dict[str, str]:
    tags = {
        KFP_PIPELINE_TAG: cfg.pipeline_name,
        PARENT_TAG: _parent_run(cfg),
        OUTPUT_TAG: os.path.abspath(cfg.output),
        STORE_TAG: cfg.checkpoint_uri,
        TRIAL_TAG: cfg.trial,
    }
    return {**checkpoints.identity_tags(cfg), **{k: v for k, v in tags.items() if v}}


def _parent_run(cfg: TrainConfig) -> str | None:
    """The run to nest under: ``parent_run_id``, else for a sweep's child its sweep's parent.
    A run given by ``mlflow_run_id`` stays where its maker nested it (KFP's task run).

    Raises:
        LookupError: a sweep's child whose KFP run has no parent run.
    """
    if cfg.parent_run_id or cfg.mlflow_run_id or not (cfg.combination and cfg.kfp_run_id):
        return cfg.parent_run_id
    parent = run_log.find_run_by_tags(
        cfg.experiment, {KFP_RUN_ID_TAG: cfg.kfp_run_id, SEARCH_TAG: GRID_SEARCH}
    )
    if parent is None:
        raise LookupError(f"expected the parent run of sweep {cfg.kfp_run_id}, found none")
    return parent


def _write_outputs(
    cfg: TrainConfig,
    model: Classifier,
    graph: OnnxGraph,
    splits: tuple[DeviceSplit, DeviceSplit],
    meta: dict[str, Any],
    history: list[dict[str, Any]],
    run_id: str | None,
) -> str:
    """model.pt, model.onnx (once it gives eager torch's answers on val photos), with
    ``int8`` model.int8.onnx (see ``_write_int8``), their digests (identity.json),
    history.json and mlflow_run_id in the output; the model logged to MLflow with its
    identity. ``splits``: train and val."""
    output = Path(cfg.output)
    mean, std = pretrained.normalisation(cfg.model, meta)
    spec = {
        "model": cfg.model,
        "channels": meta["channels"],
        "image_size": meta["image_size"],
        "mean": mean,
        "std": std,
        "classes": meta["classes"],
        "mirror_average": cfg.mirror_average,
        "shift_average": cfg.shift_average,
    }
    digests = save_trained(output, model, spec)  # spec.json: what scoring reads without torch
    float_graph = graph.write(
        output / ONNX_FILE, model, splits[1].take(slice(0, CHECKED_PHOTOS)), meta["classes"]
    )
    digests[ONNX_FILE] = sha256_of_bytes(float_graph)
    int8_graph = _write_int8(cfg, float_graph, *splits)
    if int8_graph:
        digests[INT8_FILE] = sha256_of_bytes(int8_graph)
    identity.write_record(output, digests)
    write_json(output / HISTORY_FILE, history)
    with atomic_file(output / RUN_ID_FILE, "w") as handle:
        handle.write(run_id or "")
    run_log.log_artifact(output / HISTORY_FILE)
    side = meta["image_size"]
    # a batch of two, so the exported model keeps a dynamic batch dimension
    example = np.full((2, meta["channels"], side, side), 128, np.float32)
    # beside the MLmodel file: the graphs, and the spec that names the classes
    beside = [output / name for name in (SPEC_FILE, ONNX_FILE, INT8_FILE) if name in digests]
    batched = OneBatchOfViews(model)  # the pt2 program holds the net once, not once a view
    return logged_models.log_model(
        batched, example, digests, beside, meta["classes"], views=batched.view_count()
    )


def _write_int8(
    cfg: TrainConfig, float_graph: bytes, train_data: DeviceSplit, val_data: DeviceSplit
) -> bytes | None:
    """With ``cfg.int8``, model.int8.onnx beside model.onnx where enough val photos judge
    it (``int8.judgeable``) and its val accuracy is within ``int8.MOST_POINTS_LOST`` of the
    float32 graph's (logged as ``val_accuracy_int8``): the graph written, or None. An
    earlier run's int8 file goes either way."""
    output = Path(cfg.output)
    (output / INT8_FILE).unlink(missing_ok=True)  # this step's own, of another model
    if not cfg.int8:
        return None
    from components.scoring import int8  # the quantiser's imports: only when asked for

    if not int8.judgeable(len(train_data), len(val_data)):
        return None
    picked = int8.calibration_picks(train_data.labels.cpu().numpy(), cfg.seed)
    calibration = train_data.take(torch.from_numpy(picked)).cpu().numpy()
    int8_graph = int8.quantise(float_graph, calibration)
    batches = (
        (images.cpu().numpy(), labels.cpu().numpy())
        for images, labels in val_data.batches(CPU_BATCH)
    )
    float_accuracy, int8_accuracy = int8.val_accuracies(float_graph, int8_graph, batches)
    run_log.log_metric("val_accuracy_int8", int8_accuracy)
    lost = 100 * (float_accuracy - int8_accuracy)
    if lost > int8.MOST_POINTS_LOST:
        log.warning(
            "no %s: in int8 the val accuracy is %.4f against float32's %.4f, %.2f points "
            "lower (at most %.1f allowed)",
            INT8_FILE, int8_accuracy, float_accuracy, lost, int8.MOST_POINTS_LOST,
        )  # fmt: skip
        return None
    with atomic_file(output / INT8_FILE) as handle:
        handle.write(int8_graph)
    log.info(
        "wrote %s: val accuracy %.4f in int8, %.4f in float32", INT8_FILE, int8_accuracy,
        float_accuracy,
    )  # fmt: skip
    return int8_graph
