"""Frozen layers run once: their output for every photo and view, reused by every epoch.

With a pretrained net's first blocks frozen (``frozen_blocks``), their output for a photo
never changes, so ``cached_views`` computes it once per train photo and view (the photo,
and its mirror image) and each epoch trains only the layers that learn, on one of those
views drawn at random. The val split's photos are computed once too, in the views the
model predicts with, and scored from them after every epoch.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

import torch
from torch import nn

from components.core.memory import memory_limit
from components.core.progress import logged, progress
from components.networks.efficientnet_lite import EfficientNetLite
from components.networks.models import Classifier, views_of
from components.training.batches import DeviceSplit
from components.training.inference import autocast, cpu_has_native_bf16, default_batch_size

log = logging.getLogger(__name__)

# the share of the process's memory limit the cached features may take: the arrays, the
# net and its batches need the rest
MOST_MEMORY_SHARE = 0.5

Views = Callable[[torch.Tensor], list[torch.Tensor]]


class LearnedPart(nn.Module):
    """The layers of ``net`` that learn, from the frozen layers' output to the logits:
    what training runs (and DDP wraps) when the frozen output is cached."""

    def __init__(self, net: EfficientNetLite, layout: torch.memory_format):
        super().__init__()
        self.net = net
        self.layout = layout

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net.from_frozen(features.contiguous(memory_format=self.layout))


def train_views(count: int) -> Views:
    """A train photo's cached views: the photo alone (1), or it and its mirror image (2)."""
    return lambda images: [images] if count == 1 else [images, images.flip(3)]


def predicted_views(model: Classifier) -> Views:
    """The views ``model`` averages its predictions over (components.networks.models)."""
    return lambda images: views_of(images, model.mirror_average, model.shift_average)


def cache_splits(
    model: Classifier, train: DeviceSplit, val: DeviceSplit, view_count: int, amp: bool
) -> tuple[DeviceSplit, DeviceSplit]:
    """The train split in ``view_count`` views and the val split in the views ``model``
    predicts with, as the frozen layers' output (N×V×C×H×W). Train features are computed
    under bf16 autocast as training runs (where ``amp`` and the device has bf16) and kept
    in bf16; val features as scoring computes them, float32 on a CPU.

    Raises:
        MemoryError: both would take more than ``MOST_MEMORY_SHARE`` of this process's
            memory limit; nothing is computed.
    """
    device = train.labels.device
    train_bf16 = amp and (device.type == "cuda" or cpu_has_native_bf16())
    val_bf16 = amp and device.type == "cuda"
    plans = [
        _Plan(model, train, train_views(view_count), train_bf16, "train"),
        _Plan(model, val, predicted_views(model), val_bf16, "val"),
    ]
    most = int(MOST_MEMORY_SHARE * memory_limit())
    if sum(plan.size for plan in plans) > most:
        raise MemoryError(
            f"expected the frozen layers' output within {MOST_MEMORY_SHARE:.0%} of this "
            f"process's memory limit ({most / 2**30:.1f} GiB), found "
            + " and ".join(plan.described() for plan in plans)
            + ": train on fewer photos (train_photos), freeze fewer blocks, or give the "
            "pod more memory"
        )
    cached = [plan.compute() for plan in plans]
    return cached[0], cached[1]


class _Plan:
    """One split's features to compute: their shape, type and size, known beforehand."""

    def __init__(
        self, model: Classifier, split: DeviceSplit, views: Views, in_bf16: bool, name: str
    ):
        net = model.net
        if not isinstance(net, EfficientNetLite) or not net.frozen_blocks:
            raise ValueError(
                f"expected a pretrained net with frozen blocks, found {type(net).__name__}"
            )
        self.model, self.net, self.split, self.views = model, net, split, views
        self.in_bf16, self.name = in_bf16, name
        with torch.no_grad():
            one = views(model.normalised(split.take(slice(0, 1))))
            self.view_count = len(one)
            self.shape = tuple(net.eval().frozen_part(one[0]).shape[1:])
        self.dtype = torch.bfloat16 if in_bf16 else torch.float32
        self.size = len(split) * self.view_count * math.prod(self.shape) * self.dtype.itemsize

    def described(self) -> str:
        shape = "×".join(map(str, self.shape))
        return (
            f"{self.size / 2**20:.0f} MiB for {len(self.split)} {self.name} photos × "
            f"{self.view_count} views × {shape} in {str(self.dtype).removeprefix('torch.')}"
        )

    @torch.no_grad()
    def compute(self) -> DeviceSplit:
        log.info("computing the frozen layers' output once: %s", self.described())
        device = self.split.labels.device
        was_training = self.model.training
        self.model.eval()
        features = torch.empty(
            (len(self.split), self.view_count, *self.shape), dtype=self.dtype, device=device
        )
        batch_size = default_batch_size(device)
        total = math.ceil(len(self.split) / batch_size)
        what = f"frozen layers' output, {self.name}"
        batches = logged(
            progress(self.split.batches(batch_size), total=total, desc=what, unit="batch",
                     leave=False),
            total, what, "batches",
        )  # fmt: skip
        start = 0
        for pixels, _ in batches:
            with autocast(device, on_cpu=self.in_bf16, enabled=self.in_bf16):
                for index, view in enumerate(self.views(self.model.normalised(pixels))):
                    features[start : start + len(pixels), index] = self.net.frozen_part(view)
            start += len(pixels)
        self.model.train(was_training)
        return DeviceSplit(features, self.split.labels)


@torch.no_grad()
def predict_logits(learned: LearnedPart, features: DeviceSplit, amp: bool) -> torch.Tensor:
    """Float32 logits (a row a photo, a column a class) from cached features: the log of
    the mean class probabilities over each photo's views, as ``Classifier`` predicts from
    its pixels."""
    learned.eval()
    device = features.labels.device
    outputs = []
    for batch, _ in features.batches(default_batch_size(device)):
        with autocast(device, amp):
            log_p = torch.stack(
                [learned(batch[:, view]).float().log_softmax(1) for view in range(batch.shape[1])]
            )
        outputs.append(torch.logsumexp(log_p, 0) - math.log(batch.shape[1]))
    return torch.cat(outputs) if outputs else torch.empty(0, 2, device=device)


def pick_views(features: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One view of each photo of a batch of cached features (B×V×C×H×W), drawn at random."""
    count, view_count = features.shape[:2]
    drawn = torch.randint(view_count, (count,), generator=generator, device=features.device)
    return features[torch.arange(count, device=features.device), drawn]
