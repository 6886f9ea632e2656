"""Train step: arrays -> a trained classifier, a checkpoint every epoch, tracked in MLflow.

python -m components.train --data DIR --output DIR [--model tutorial_cnn] [--epochs 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import tempfile
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np
import torch
from torch.nn import functional as F

from components import checkpoints, runtime, tracking
from components.atomic import atomic_file, write_json
from components.batches import DeviceSplit, augment
from components.data import read_meta
from components.inference import autocast, predict_logits
from components.logs import setup_logging
from components.models import MODELS, WANTS_CROPS, Classifier, build_model, save_classifier
from components.presets import apply_preset

log = logging.getLogger(__name__)

SCHEDULES = ("constant", "onecycle")
# not run parameters: where things are and how this attempt was started
NOT_PARAMS = {
    "data",
    "output",
    "resume",
    "dry_run",
    "checkpoint_uri",
    "mlflow_run_id",
    "kfp_run_id",
    "pipeline_name",
}


@dataclass(frozen=True)
class TrainConfig:
    """Everything a training run depends on; each field is a CLI flag and a pipeline parameter."""

    data: str
    output: str
    model: str = "tutorial_cnn"
    epochs: int = 5
    batch_size: int = 100
    lr: float = 1e-3
    weight_decay: float = 0.0
    schedule: str = "constant"
    augment: bool = True
    device: str = "auto"
    amp: bool = True
    seed: int = 0
    resume: bool = False
    dry_run: bool = False
    experiment: str = "dogs-vs-cats"
    checkpoint_uri: str | None = None
    mlflow_run_id: str | None = None
    kfp_run_id: str | None = None
    pipeline_name: str | None = None

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; expected one of: {', '.join(MODELS)}")
        if self.schedule not in SCHEDULES:
            raise ValueError(
                f"unknown schedule {self.schedule!r}; expected one of: {', '.join(SCHEDULES)}"
            )
        if self.epochs < 1 or self.batch_size < 1 or self.lr <= 0:
            raise ValueError(
                f"expected epochs >= 1, batch size >= 1 and lr > 0, found "
                f"{self.epochs}, {self.batch_size} and {self.lr}"
            )


@dataclass(frozen=True)
class TrainResult:
    """What a training run hands back; ``run_id`` and ``model_uri`` are None on ranks > 0."""

    run_id: str | None
    history: list[dict]
    model_uri: str | None


def train(cfg: TrainConfig) -> TrainResult:
    """Train, checkpointing each epoch; resume from the newest checkpoint with ``cfg.resume``.

    Runs unchanged under ``torchrun``: each rank trains on its share of every global
    batch, and rank 0 alone logs, checkpoints and writes the model (other ranks return
    no run id or model URI).
    """
    workers, device = runtime.start(cfg.device)
    try:
        return _train(cfg, workers, device)
    finally:
        runtime.stop(workers)


def _train(cfg: TrainConfig, workers: runtime.Workers, device: torch.device) -> TrainResult:
    if workers.is_main:
        tracking.check_server()  # before any time goes into training
    if cfg.batch_size % workers.world_size:
        raise ValueError(
            f"expected a batch size divisible by the {workers.world_size} "
            f"processes, found {cfg.batch_size}"
        )
    meta = read_meta(Path(cfg.data))
    train_data = DeviceSplit.load(Path(cfg.data), "train", device)
    val_data = DeviceSplit.load(Path(cfg.data), "val", device)
    model = _new_model(cfg, meta, device)
    optimizer, scheduler = make_optimizer(model, cfg, math.ceil(len(train_data) / cfg.batch_size))
    state = runtime.share(workers, find_checkpoint(cfg) if cfg.resume and workers.is_main else None)
    if state:
        _restore(state, model, optimizer, scheduler)
    parallel = runtime.wrap(model, workers, device)
    history = state["history"] if state else []
    run_id = state["mlflow_run_id"] if state else cfg.mlflow_run_id
    run_name = f"{cfg.model}-{cfg.epochs}ep-seed{cfg.seed}"
    tracked = (
        tracking.start_run(cfg.experiment, run_id=run_id, run_name=run_name, tags=_tags(cfg))
        if workers.is_main
        else contextlib.nullcontext(None)
    )
    with tracked as run_id:
        if workers.is_main and not state:
            tracking.log_params(run_params(cfg, meta))
        for epoch in range(len(history) + 1, cfg.epochs + 1):
            metrics = run_epoch(
                parallel, model, optimizer, scheduler, train_data, val_data, cfg, epoch, workers
            )
            history.append({"epoch": epoch, **metrics})
            if workers.is_main:
                tracking.log_metrics(metrics, step=epoch)
                _checkpoint(cfg, model, optimizer, scheduler, history, run_id)
            if cfg.dry_run:
                break
        model_uri = _write_outputs(cfg, model, meta, history, run_id) if workers.is_main else None
    return TrainResult(run_id, history, model_uri)


def _new_model(cfg: TrainConfig, meta: dict, device: torch.device) -> Classifier:
    """The untrained net for the data's shape, its initial weights fixed by the seed."""
    torch.manual_seed(cfg.seed)
    net = build_model(cfg.model, meta["channels"], meta["image_size"])
    return Classifier(net, meta["mean"], meta["std"]).to(device)


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig, steps_per_epoch: int):
    """AdamW (plain Adam at weight decay 0) and a per-step learning-rate schedule."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler: torch.optim.lr_scheduler.LRScheduler
    if cfg.schedule == "onecycle":
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=cfg.lr, total_steps=cfg.epochs * steps_per_epoch
        )
    else:
        scheduler = torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0)
    return optimizer, scheduler


def epoch_seed(seed: int, epoch: int) -> int:
    """Every epoch's randomness derives from (seed, epoch): a resumed run replays it exactly."""
    return seed * 1_000_003 + epoch


def run_epoch(
    parallel,
    model,
    optimizer,
    scheduler,
    train_data,
    val_data,
    cfg,
    epoch,
    workers: runtime.Workers,
) -> dict[str, float]:
    """One pass over the train split, then the val split; the epoch's metrics, all ranks summed.

    ``parallel`` is the model as trained (DDP across ranks), ``model`` the bare one.
    """
    device = train_data.labels.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    sums = train_one_epoch(parallel, optimizer, scheduler, train_data, cfg, epoch, workers)
    loss_sum, correct, seen = (t.item() for t in runtime.sum_across(workers, *sums))
    seconds = time.perf_counter() - started  # .item() above waited for the device
    val_loss, val_correct, val_seen = validate(model, val_data, cfg, workers)
    metrics = {
        "train_loss": loss_sum / seen,
        "train_accuracy": correct / seen,
        "val_loss": val_loss / val_seen,
        "val_accuracy": val_correct / val_seen,
        "epoch_seconds": seconds,
        "images_per_second": seen / seconds,
    }
    if device.type == "cuda":
        metrics["gpu_memory_peak_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    if workers.is_main:
        log.info(
            "epoch %d/%d %s",
            epoch,
            cfg.epochs,
            " ".join(f"{k}={v:.4g}" for k, v in metrics.items()),
        )
    return metrics


def train_one_epoch(
    parallel,
    optimizer,
    scheduler,
    data: DeviceSplit,
    cfg: TrainConfig,
    epoch: int,
    workers: runtime.Workers,
):
    """Shuffled, augmented batches; the summed loss, correct count and count, on the device.

    Every rank draws the same permutation and takes its share of each global batch.
    Nothing here waits for the device (no ``.item()``), so the GPU never idles between
    batches.
    """
    device = data.labels.device
    torch.manual_seed(epoch_seed(cfg.seed, epoch) + workers.rank)  # dropout
    order = torch.Generator(device).manual_seed(epoch_seed(cfg.seed, epoch))
    noise = torch.Generator(device).manual_seed(epoch_seed(cfg.seed, epoch) + workers.rank)
    crop = max(1, data.images.shape[-1] // 8) if cfg.model in WANTS_CROPS else 0
    parallel.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    seen = torch.zeros((), device=device, dtype=torch.int64)
    batches = data.batches(
        cfg.batch_size // workers.world_size, order, workers.rank, workers.world_size
    )
    for pixels, labels in batches:
        inputs = augment(pixels, noise, crop) if cfg.augment else pixels.float()
        with autocast(device, cfg.amp):
            logits = parallel(inputs)
            loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        scheduler.step()
        loss_sum += loss.detach().float() * len(labels)
        correct += (logits.argmax(1) == labels).sum()
        seen += len(labels)
        if cfg.dry_run:
            break
    return loss_sum, correct, seen.float()


def validate(
    model, data: DeviceSplit, cfg: TrainConfig, workers: runtime.Workers
) -> tuple[float, float, float]:
    """Summed val loss, correct count and count over all ranks, each scoring its shard."""
    shard = data.shard(workers.rank, workers.world_size)
    logits = predict_logits(model, shard, amp=cfg.amp)
    sums = (
        F.cross_entropy(logits, shard.labels, reduction="sum"),
        (logits.argmax(1) == shard.labels).sum().float(),
        torch.tensor(float(len(shard)), device=logits.device),
    )
    loss, correct, count = (float(t.item()) for t in runtime.sum_across(workers, *sums))
    return loss, correct, count


def run_params(cfg: TrainConfig, meta: dict) -> dict[str, object]:
    """The run's MLflow params: the config and the dataset's shape and counts."""
    params = {k: v for k, v in asdict(cfg).items() if k not in NOT_PARAMS}
    params.update(image_size=meta["image_size"], channels=meta["channels"])
    for split, counts in meta["counts"].items():
        params.update({f"data_{split}_{name}": count for name, count in counts.items()})
    return params


def _tags(cfg: TrainConfig) -> dict[str, str]:
    tags = {tracking.KFP_RUN_ID_TAG: cfg.kfp_run_id, tracking.KFP_PIPELINE_TAG: cfg.pipeline_name}
    return {key: value for key, value in tags.items() if value}


def _checkpoint(cfg, model, optimizer, scheduler, history, run_id) -> None:
    """Save the rolling checkpoint locally, then copy it to the durable places."""
    path = Path(cfg.output) / checkpoints.CHECKPOINT
    checkpoints.save_checkpoint(
        {
            "model": model.state_dict(),
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "epoch": len(history),
            "rng": {"seed": cfg.seed, "next_epoch": len(history) + 1},
            "history": history,
            "config": asdict(cfg),
            "mlflow_run_id": run_id,
        },
        path,
    )
    if cfg.checkpoint_uri:
        checkpoints.CheckpointStore(cfg.checkpoint_uri).put(path)
    tracking.log_checkpoint(path)


def find_checkpoint(cfg: TrainConfig) -> dict | None:
    """The newest checkpoint in the output directory, the store, or this run's MLflow run."""
    state = checkpoints.newest(list(_candidate_checkpoints(cfg)))
    if state:
        _check_compatible(state, cfg)
        log.info("resuming after epoch %d (MLflow run %s)", state["epoch"], state["mlflow_run_id"])
    else:
        log.info("no checkpoint found to resume from; starting at epoch 1")
    return state


def _candidate_checkpoints(cfg: TrainConfig):
    local = Path(cfg.output) / checkpoints.CHECKPOINT
    if local.is_file():
        yield checkpoints.load_checkpoint(local)
    run_id = cfg.mlflow_run_id or (
        cfg.kfp_run_id
        and tracking.find_run_by_tag(cfg.experiment, tracking.KFP_RUN_ID_TAG, cfg.kfp_run_id)
    )
    with tempfile.TemporaryDirectory() as scratch:  # private to this run, removed after
        fetched = Path(scratch) / checkpoints.CHECKPOINT
        if cfg.checkpoint_uri and checkpoints.CheckpointStore(cfg.checkpoint_uri).fetch(fetched):
            yield checkpoints.load_checkpoint(fetched)
        if run_id and (path := tracking.download_checkpoint(run_id, Path(scratch) / "mlflow")):
            yield checkpoints.load_checkpoint(path)


def _check_compatible(state: dict, cfg: TrainConfig) -> None:
    saved = state["config"]
    keys = ["model", "batch_size", "seed", "schedule"]
    if cfg.schedule == "onecycle":
        keys.append("epochs")  # the schedule's length is fixed when it starts
    for key in keys:
        if saved[key] != getattr(cfg, key):
            raise ValueError(
                f"cannot resume: the checkpoint has {key}={saved[key]!r}, "
                f"this run asks for {key}={getattr(cfg, key)!r}"
            )


def _restore(state, model, optimizer, scheduler) -> None:
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])


def _write_outputs(cfg, model, meta, history, run_id) -> str:
    """model.pt, history.json and mlflow_run_id in the output; the model logged to MLflow."""
    output = Path(cfg.output)
    spec = {
        "model": cfg.model,
        "channels": meta["channels"],
        "image_size": meta["image_size"],
        "mean": meta["mean"],
        "std": meta["std"],
        "classes": meta["classes"],
    }
    save_classifier(output / "model.pt", model, spec)
    write_json(output / "history.json", history)
    with atomic_file(output / "mlflow_run_id", "w") as handle:
        handle.write(run_id)
    tracking.log_artifact(output / "history.json")
    side = meta["image_size"]
    # a batch of two, so the exported model keeps a dynamic batch dimension
    example = np.full((2, meta["channels"], side, side), 128, np.float32)
    return tracking.log_model(model, example)


# flags that turn a default-on feature off
NEGATED_FLAGS = {"augment": "--no-augment", "amp": "--no-amp"}


def config_to_argv(cfg: TrainConfig) -> list[str]:
    """The command line that rebuilds ``cfg``: how torchrun and PyTorchJob pods get it."""
    argv = []
    for field in fields(TrainConfig):
        value = getattr(cfg, field.name)
        flag = "--" + field.name.replace("_", "-")
        if field.name in NEGATED_FLAGS:
            argv += [] if value else [NEGATED_FLAGS[field.name]]
        elif isinstance(value, bool):
            argv += [flag] if value else []
        elif value is not None:
            argv += [flag, str(value)]
    return argv


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.train", description=__doc__.splitlines()[0]
    )
    defaults = {f.name: f.default for f in fields(TrainConfig)}
    add = parser.add_argument
    add("--data", required=True, help="directory written by the preprocess step")
    add("--output", required=True, help="directory for model.pt, checkpoint.pt, history.json")
    add(
        "--model",
        default=defaults["model"],
        choices=list(MODELS),
        help=f"network (default: {defaults['model']})",
    )
    add("--epochs", type=int, default=defaults["epochs"], help="(default: %(default)s)")
    add("--batch-size", type=int, default=defaults["batch_size"], help="(default: %(default)s)")
    add(
        "--lr", type=float, default=defaults["lr"], help="peak learning rate (default: %(default)s)"
    )
    add(
        "--weight-decay",
        type=float,
        default=defaults["weight_decay"],
        help="AdamW weight decay (default: %(default)s)",
    )
    add(
        "--schedule",
        default=defaults["schedule"],
        choices=SCHEDULES,
        help="learning-rate schedule (default: %(default)s)",
    )
    add(
        "--no-augment",
        dest="augment",
        action="store_false",
        help="turn off random flips and crops (default: on)",
    )
    add("--device", default=defaults["device"], help="auto, cpu, cuda or cuda:N (default: auto)")
    add(
        "--no-amp",
        dest="amp",
        action="store_false",
        help="turn off bf16 autocast on CUDA (default: on)",
    )
    add("--seed", type=int, default=defaults["seed"], help="(default: %(default)s)")
    add(
        "--resume",
        action="store_true",
        help="continue from the newest checkpoint and its MLflow run (default: off)",
    )
    add("--dry-run", action="store_true", help="one batch of one epoch: a quick smoke test")
    add(
        "--experiment",
        default=defaults["experiment"],
        help="MLflow experiment (default: %(default)s)",
    )
    add(
        "--checkpoint-uri",
        default=None,
        help="durable copy of each checkpoint: s3://BUCKET/PREFIX or a directory (default: none; "
        "the MLflow run's artifacts always hold one)",
    )
    add("--mlflow-run-id", default=None, help="log into this existing MLflow run")
    add("--kfp-run-id", default=None, help="tag the run with this Kubeflow Pipelines run id")
    add("--pipeline-name", default=None, help="tag the run with this pipeline name")
    return parser


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    """The TrainConfig of a command line, ``--preset`` applied under the explicit flags."""
    parser = build_parser()
    apply_preset(parser, argv, "train")
    args = vars(parser.parse_args(argv))
    args.pop("preset")
    return TrainConfig(**args)


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(argv)
    setup_logging()
    result = train(cfg)
    print(
        json.dumps(
            {"mlflow_run_id": result.run_id, "model_uri": result.model_uri, **result.history[-1]}
        )
    )


if __name__ == "__main__":
    main()
