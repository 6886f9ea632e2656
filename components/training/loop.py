"""One epoch of training then validation: the same code in one process or many (DDP)."""

from __future__ import annotations

import logging
import math
import random
import time
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from torch.nn import functional as F
from torch.optim.lr_scheduler import LRScheduler

from components.core.progress import progress
from components.networks import pretrained
from components.networks.backbones import BACKBONES
from components.networks.efficientnet_lite import EfficientNetLite
from components.networks.models import Classifier, build_model
from components.networks.registry import NETS
from components.scoring.scorers import CPU_BATCH, pick_runtime, score_batches
from components.training import frozen_features, runtime
from components.training.batches import DeviceSplit, augment, cutmix, downscale, epoch_side
from components.training.config import TrainConfig
from components.training.frozen_features import LearnedPart
from components.training.inference import autocast, predict_logits
from components.training.onnx_graph import OnnxGraph
from components.training.stopping import stop_if_asked

log = logging.getLogger(__name__)


class DivergedError(RuntimeError):
    """The loss became NaN or infinite, or grew by orders of magnitude; nothing of this
    epoch was saved."""


# a loss a thousand times a coin toss's (ln 2): no longer learning, whatever the classes
# (a guess among 100 loses ln 100, 4.6)
DIVERGED_LOSS = 1000 * math.log(2)


@dataclass
class Learner:
    """What training changes: the net (bare, and as trained), its optimiser and schedule."""

    model: Classifier
    parallel: torch.nn.Module  # what trains (``model``, or ``learned``) wrapped for DDP
    optimizer: torch.optim.Optimizer
    scheduler: LRScheduler
    onnx: OnnxGraph | None  # what scores the val split on a CPU, where the runtime is onnx
    learned: LearnedPart | None = None  # cached views: the net's part from the frozen output


def make_optimizer(
    model: torch.nn.Module, cfg: TrainConfig, steps_per_epoch: int
) -> tuple[torch.optim.Optimizer, LRScheduler]:
    """AdamW (plain Adam at weight decay 0), fused into one kernel on CUDA, and a per-step
    learning-rate schedule."""
    on_cuda = next(model.parameters()).is_cuda
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay, fused=on_cuda or None
    )
    scheduler: LRScheduler
    if cfg.schedule == "onecycle":
        scheduler = torch.optim.lr_scheduler.OneCycleLR(
            optimizer, max_lr=cfg.lr, total_steps=cfg.epochs * steps_per_epoch
        )
    else:
        scheduler = torch.optim.lr_scheduler.ConstantLR(optimizer, factor=1.0)
    return optimizer, scheduler


def new_learner(
    cfg: TrainConfig,
    meta: dict[str, Any],
    workers: runtime.Workers,
    device: torch.device,
    steps_per_epoch: int,
    channels_last: bool = True,
) -> Learner:
    """The untrained net for the data's shape (initial weights fixed by the seed), wrapped
    for DDP and compiled as ``cfg`` says, with its optimiser and schedule."""
    torch.manual_seed(cfg.seed)
    # every batch has the same shape: let cuDNN time its convolution algorithms once
    torch.backends.cudnn.benchmark = device.type == "cuda"
    net = build_model(cfg.model, meta["channels"], meta["image_size"], len(meta["classes"]))
    if cfg.model in BACKBONES:
        pretrained.load_pretrained(net, cfg.model)
    if isinstance(net, EfficientNetLite):
        net.freeze(cfg.frozen_blocks, cfg.frozen_statistics)
    mean, std = pretrained.normalisation(cfg.model, meta)
    model = Classifier(net, mean, std, channels_last, cfg.mirror_average, cfg.shift_average)
    model = model.to(device)
    learned = None
    if cfg.cached_views and isinstance(net, EfficientNetLite):  # frozen blocks: a backbone
        learned = LearnedPart(net, model.layout)
    parallel = runtime.wrap(learned or model, workers, device)
    compiled = cast(torch.nn.Module, torch.compile(parallel)) if cfg.compile else parallel
    onnx = OnnxGraph() if pick_runtime(cfg.runtime, device.type) == "onnx" else None
    optimizer, scheduler = make_optimizer(model, cfg, steps_per_epoch)
    return Learner(model, compiled, optimizer, scheduler, onnx, learned)


def epoch_seed(seed: int, epoch: int) -> int:
    """Every epoch's randomness derives from (seed, epoch): a resumed run replays it exactly."""
    return seed * 1_000_003 + epoch


def run_epoch(
    learner: Learner,
    train_data: DeviceSplit,
    val_data: DeviceSplit,
    cfg: TrainConfig,
    epoch: int,
    workers: runtime.Workers,
) -> dict[str, float]:
    """Train one epoch, then score the val split where ``validates`` says so.

    Returns:
        The epoch's metrics, summed over all ranks, under the names MLflow logs.

    Raises:
        DivergedError: the train or val loss is NaN or infinite, or over ``DIVERGED_LOSS``.
    """
    device = train_data.labels.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    started = time.perf_counter()
    sums = train_one_epoch(learner, train_data, cfg, epoch, workers)
    loss_sum, correct, seen = (t.item() for t in runtime.sum_across(workers, *sums))
    seconds = time.perf_counter() - started  # .item() above waited for the device
    metrics = {"train_loss": loss_sum / seen, "train_accuracy": correct / seen}
    if validates(cfg, epoch):
        val_loss, val_correct, val_seen = validate(learner, val_data, cfg, workers)
        metrics.update(val_loss=val_loss / val_seen, val_accuracy=val_correct / val_seen)
    metrics.update(epoch_seconds=seconds, images_per_second=seen / seconds)
    losses = {name: metrics[name] for name in ("train_loss", "val_loss") if name in metrics}
    if not all(math.isfinite(loss) and loss < DIVERGED_LOSS for loss in losses.values()):
        kept = (
            f"the checkpoint after epoch {epoch - 1} is kept"
            if epoch > 1
            else "no epoch finished: there is no checkpoint or model"
        )
        found = " and ".join(f"{name}={loss:.4g}" for name, loss in losses.items())
        raise DivergedError(
            f"epoch {epoch}: expected finite losses below {DIVERGED_LOSS:.0f} (a thousand "
            f"times a coin toss's), found {found}: training diverged; lower --lr (now "
            f"{cfg.lr}); {kept}"
        )
    if device.type == "cuda":
        metrics["gpu_memory_peak_mb"] = torch.cuda.max_memory_allocated(device) / 2**20
    if workers.is_main:
        # "name value", not "name=value": with --metrics-stdout, the collector's lines
        # are the only ones Katib reads as metrics
        summary = ", ".join(f"{k} {v:.4g}" for k, v in metrics.items())
        log.info("epoch %d/%d %s", epoch, cfg.epochs, summary)
    return metrics


def validates(cfg: TrainConfig, epoch: int) -> bool:
    """Whether ``epoch`` ends with a score of the val split: every ``validate_every``th,
    the last, and a dry run's one."""
    return epoch % cfg.validate_every == 0 or epoch == cfg.epochs or cfg.dry_run


def train_one_epoch(
    learner: Learner, data: DeviceSplit, cfg: TrainConfig, epoch: int, workers: runtime.Workers
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Shuffled, augmented batches; the summed loss, correct count and count, on the device.

    Every rank draws the same permutation and takes its share of each global batch.
    Nothing here waits for the device (no ``.item()``), so the GPU never idles between
    batches.
    """
    device = data.labels.device
    torch.manual_seed(epoch_seed(cfg.seed, epoch) + workers.rank)  # dropout
    order = torch.Generator(device).manual_seed(epoch_seed(cfg.seed, epoch))
    noise = torch.Generator(device).manual_seed(epoch_seed(cfg.seed, epoch) + workers.rank)
    mixing = random.Random(epoch_seed(cfg.seed, epoch) + workers.rank)  # CutMix's boxes
    crop = max(1, data.image_shape[-1] // 8) if NETS[cfg.model].random_crops else 0
    side = epoch_side(data.image_shape[-1], cfg.start_size, epoch, cfg.epochs)
    learner.parallel.train()
    loss_sum = torch.zeros((), device=device)
    correct = torch.zeros((), device=device, dtype=torch.int64)
    seen = torch.zeros((), device=device, dtype=torch.int64)
    share = cfg.batch_size // workers.world_size
    batches = progress(
        data.batches(share, order, workers.rank, workers.world_size),
        total=math.ceil(len(data) / cfg.batch_size),
        desc=f"epoch {epoch}/{cfg.epochs}",
        unit="batch",
        leave=False,
        disable=None if workers.is_main else True,
    )
    for pixels, labels in batches:
        stop_if_asked()  # SIGTERM's stop, between batches
        if learner.learned:  # cached frozen features: one of each photo's views
            inputs = frozen_features.pick_views(pixels, noise)
        else:
            inputs = augment(pixels, noise, crop, cfg.min_crop_area) if cfg.augment else pixels
            inputs = downscale(inputs.float(), side)
        partner, own = None, 1.0
        if cfg.cutmix and mixing.random() < cfg.cutmix:
            inputs, partner, own = cutmix(inputs, noise, mixing)
        with autocast(device, cfg.amp, on_cpu=True):
            logits = learner.parallel(inputs)
            loss = F.cross_entropy(logits, labels, label_smoothing=cfg.label_smoothing)
            if partner is not None:
                partners = F.cross_entropy(
                    logits, labels[partner], label_smoothing=cfg.label_smoothing
                )
                loss = own * loss + (1 - own) * partners
        learner.optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        learner.optimizer.step()
        learner.scheduler.step()
        loss_sum += loss.detach().float() * len(labels)
        correct += (logits.argmax(1) == labels).sum()
        seen += len(labels)
        if cfg.dry_run:
            break
    return loss_sum, correct, seen.float()


def validate(
    learner: Learner, data: DeviceSplit, cfg: TrainConfig, workers: runtime.Workers
) -> tuple[float, float, float]:
    """Summed val loss, correct count and count over all ranks, each scoring its shard
    (from cached features, by ONNX Runtime where the learner has a graph, else by torch)."""
    shard = data.shard(workers.rank, workers.world_size)
    if learner.learned:
        logits = frozen_features.predict_logits(learner.learned, shard, cfg.amp)
    elif learner.onnx:
        scorer = learner.onnx.scorer(learner.model, shard.take(slice(0, 2)))
        scored = [score_batches(scorer, batch.numpy()) for batch, _ in shard.batches(CPU_BATCH)]
        logits = torch.from_numpy(np.concatenate(scored))
    else:
        logits = predict_logits(learner.model, shard, amp=cfg.amp)
    sums = (
        F.cross_entropy(logits, shard.labels, reduction="sum"),
        (logits.argmax(1) == shard.labels).sum().float(),
        torch.tensor(float(len(shard)), device=logits.device),
    )
    loss, correct, count = (float(t.item()) for t in runtime.sum_across(workers, *sums))
    return loss, correct, count
