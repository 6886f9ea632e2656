"""Whole splits resident on the device as uint8, served in batches, augmented there."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Iterator
from pathlib import Path

import torch
from torch.nn import functional as F

from components.data.arrays import open_split
from components.data.shards import MappedSplit

log = logging.getLogger(__name__)


class DeviceSplit:
    """One split's int64 labels on ``device``, and its images (uint8 N×C×H×W, or cached
    features): on the device too, or on disk (``MappedSplit``), read a batch at a time."""

    def __init__(self, images: torch.Tensor | MappedSplit, labels: torch.Tensor):
        self.images, self.labels = images, labels

    @classmethod
    def load(
        cls, directory: Path, split: str, device: torch.device, budget: int | None = None,
        count: int = 0, seed: int = 0,
    ) -> DeviceSplit:  # fmt: skip
        """The split (``count`` of its photos where given: ``pick``'s), loaded whole onto
        ``device`` where its photos take at most ``budget`` bytes (None: whatever they
        take), else read from its shards a batch at a time; which of the two is logged."""
        mapped = open_split(directory, split)
        index = _drawn(len(mapped), count, seed)
        if index is not None:
            mapped = mapped.subset(index.numpy())
        labels = torch.from_numpy(mapped.labels).to(device)
        size = f"{len(mapped)} {split} photos ({mapped.nbytes / 2**30:.2f} GiB)"
        if budget is None or mapped.nbytes <= budget:
            log.info("%s loaded whole onto %s", size, device)
            return cls(torch.from_numpy(mapped.images()).to(device), labels)
        log.info(
            "%s read from %d shards a batch at a time: over the %.2f GiB held whole "
            "(memory_budget_mb)", size, len(mapped.shards), budget / 2**30,
        )  # fmt: skip
        return cls(mapped, labels)

    def __len__(self) -> int:
        return len(self.labels)

    @property
    def resident_bytes(self) -> int:
        """The bytes of images this split holds in memory (none where read from disk)."""
        return 0 if isinstance(self.images, MappedSplit) else self.images.nbytes

    @property
    def image_shape(self) -> tuple[int, ...]:
        """One sample's shape: C×H×W for photos."""
        if isinstance(self.images, MappedSplit):
            return self.images.image_shape
        return tuple(self.images.shape[1:])

    def take(self, index: torch.Tensor | slice) -> torch.Tensor:
        """The images at ``index``, on the labels' device."""
        if not isinstance(self.images, MappedSplit):
            return self.images[index]
        rows = index if isinstance(index, slice) else index.cpu().numpy()
        return torch.from_numpy(self.images.images(rows)).to(self.labels.device)

    def pick(self, count: int, seed: int) -> DeviceSplit:
        """``count`` of the samples, drawn at random by ``seed`` and kept in order; all of
        them at 0 or where ``count`` is the split's size or more."""
        index = _drawn(len(self), count, seed)
        if index is None:
            return self
        return self._subset(index.to(self.labels.device))

    def shard(self, rank: int, world_size: int) -> DeviceSplit:
        """Every ``world_size``-th sample from ``rank``: this process's share."""
        return self._subset(torch.arange(rank, len(self), world_size, device=self.labels.device))

    def _subset(self, index: torch.Tensor) -> DeviceSplit:
        if isinstance(self.images, MappedSplit):
            return DeviceSplit(self.images.subset(index.cpu().numpy()), self.labels[index])
        return DeviceSplit(self.images[index], self.labels[index])

    def batches(
        self,
        batch_size: int,
        generator: torch.Generator | None = None,
        rank: int = 0,
        world_size: int = 1,
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """Batches in order, or shuffled by ``generator`` (on the data's device).

        With ``world_size`` > 1, rank ``rank`` gets every ``world_size``-th sample of the
        shared order (the tail that does not divide evenly is left out, so every rank has
        as many batches): rank r's i-th batch is its share of the i-th global batch.
        Shuffled, a batch read from shards draws its photos from all of them.
        """
        count = len(self)
        if generator is not None:
            order = torch.randperm(count, generator=generator, device=self.labels.device)
        else:
            order = torch.arange(count, device=self.labels.device)
        if world_size > 1:
            order = order[: count - count % world_size][rank::world_size]
        for start in range(0, len(order), batch_size):
            index = order[start : start + batch_size]
            yield self.take(index), self.labels[index]


def _drawn(size: int, count: int, seed: int) -> torch.Tensor | None:
    """``count`` of ``range(size)`` drawn at random by ``seed``, in order; None for all
    (``count`` 0, or ``size`` or more)."""
    if not count or count >= size:
        return None
    drawn = torch.randperm(size, generator=torch.Generator().manual_seed(seed))
    return drawn[:count].sort().values


def augment(
    pixels: torch.Tensor,
    generator: torch.Generator,
    crop_padding: int = 0,
    min_crop_area: float = 1.0,
) -> torch.Tensor:
    """Random horizontal flips, then random crops, as float pixels.

    The crops are shifted crops after ``crop_padding`` pixels of reflect padding, or with
    ``min_crop_area`` below 1 random resized crops: a box of that share of the image or
    more, aspect 3:4 to 4:3, anywhere inside it, scaled back to the full size.
    """
    count = len(pixels)
    flip = torch.rand(count, generator=generator, device=pixels.device) < 0.5
    if min_crop_area < 1:
        pixels = pixels.float()
        pixels = torch.where(flip.view(-1, 1, 1, 1), pixels.flip(3), pixels)
        return _random_resized_crop(pixels, generator, min_crop_area)
    return _flipped_crop(pixels, flip, generator, crop_padding)


def epoch_side(full: int, start: int, epoch: int, epochs: int) -> int:
    """Progressive resizing: the side epoch ``epoch`` (1-based) of ``epochs`` trains at,
    growing linearly from ``start`` to ``full`` in steps of 8 pixels; ``start`` 0: always
    ``full``."""
    if not start or start >= full or epochs == 1:
        return full
    grown = (full - start) * (epoch - 1) / (epochs - 1)
    return min(full, start + round(grown / 8) * 8)


def downscale(pixels: torch.Tensor, side: int) -> torch.Tensor:
    """Float pixels resized to ``side``×``side`` with antialiasing (as preprocess shrinks
    photos); unchanged at their own side."""
    if pixels.shape[-1] == side:
        return pixels
    return F.interpolate(pixels, size=(side, side), mode="bilinear", antialias=True)


def cutmix(
    pixels: torch.Tensor, generator: torch.Generator, draws: random.Random
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """CutMix: one random box of every image replaced by the same box of another image of
    the batch (its partner), the box's area a uniform share of the image.

    Returns:
        The mixed pixels, each image's partner (an index into the batch) and the share
        of each image that is still its own, which weights its own label in the loss.
    """
    count, _, height, width = pixels.shape
    partner = torch.randperm(count, generator=generator, device=pixels.device)
    side = math.sqrt(draws.random())
    box_height, box_width = round(height * side), round(width * side)
    top, left = draws.randint(0, height - box_height), draws.randint(0, width - box_width)
    rows, cols = slice(top, top + box_height), slice(left, left + box_width)
    mixed = pixels.clone()
    mixed[:, :, rows, cols] = pixels[partner, :, rows, cols]
    return mixed, partner, 1 - box_height * box_width / (height * width)


def _random_resized_crop(
    pixels: torch.Tensor, generator: torch.Generator, min_area: float
) -> torch.Tensor:
    count = len(pixels)

    def uniform(low: float, high: float) -> torch.Tensor:
        return low + (high - low) * torch.rand(count, generator=generator, device=pixels.device)

    area = uniform(min_area, 1.0)
    aspect = torch.exp(uniform(math.log(3 / 4), math.log(4 / 3)))
    # the box's half-sides and centre in grid_sample's coordinates, where the image is [-1, 1]²
    width, height = (area * aspect).sqrt().clamp(max=1), (area / aspect).sqrt().clamp(max=1)
    theta = torch.zeros(count, 2, 3, device=pixels.device)
    theta[:, 0, 0], theta[:, 1, 1] = width, height
    theta[:, 0, 2], theta[:, 1, 2] = uniform(-1, 1) * (1 - width), uniform(-1, 1) * (1 - height)
    grid = F.affine_grid(theta, list(pixels.shape), align_corners=False)
    return F.grid_sample(pixels, grid, padding_mode="reflection", align_corners=False)


def _flipped_crop(
    pixels: torch.Tensor, flip: torch.Tensor, generator: torch.Generator, padding: int
) -> torch.Tensor:
    """Each image mirrored where ``flip``, then cropped at a random shift of up to
    ``padding`` pixels after reflect padding, as float pixels: the same pixels as
    flipping, padding and cropping the float batch in turn, with the uint8 pixels copied
    once (the CPU) or gathered once (a GPU)."""
    count, device = len(pixels), pixels.device
    if padding:
        dy = torch.randint(0, 2 * padding + 1, (count,), generator=generator, device=device)
        dx = torch.randint(0, 2 * padding + 1, (count,), generator=generator, device=device)
    else:  # flips only
        dy = dx = torch.zeros(count, dtype=torch.int64, device=device)
    if device.type == "cpu":
        return _crop_image_by_image(pixels, flip, dy, dx, padding)
    return _crop_in_one_gather(pixels, flip, dy, dx, padding)


def _crop_image_by_image(
    pixels: torch.Tensor, flip: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, padding: int
) -> torch.Tensor:
    """The CPU's way: the batch padded once, then each crop copied (a fifth of the time
    of three passes over the batch, at 100 photos of 96×96)."""
    count, channels, height, width = pixels.shape
    padded = F.pad(pixels, (padding,) * 4, mode="reflect") if padding else pixels
    out = torch.empty((count, channels, height, width))
    for index, (mirrored, top, left) in enumerate(
        zip(flip.tolist(), dy.tolist(), dx.tolist(), strict=True)
    ):
        if mirrored:  # the mirror image's crop at ``left`` is this crop, mirrored
            left = 2 * padding - left
        crop = padded[index, :, top : top + height, left : left + width]
        out[index] = crop.flip(2) if mirrored else crop
    return out


def _crop_in_one_gather(
    pixels: torch.Tensor, flip: torch.Tensor, dy: torch.Tensor, dx: torch.Tensor, padding: int
) -> torch.Tensor:
    """The GPU's way: one gather kernel for the batch, not one copy an image."""
    count, channels, height, width = pixels.shape
    device = pixels.device
    rows = _reflected(dy.view(-1, 1) - padding + torch.arange(height, device=device), height)
    cols = _reflected(dx.view(-1, 1) - padding + torch.arange(width, device=device), width)
    cols = torch.where(flip.view(-1, 1), width - 1 - cols, cols)
    samples = torch.arange(count, device=device).view(count, 1, 1, 1)
    planes = torch.arange(channels, device=device).view(1, -1, 1, 1)
    crops = pixels[samples, planes, rows.view(count, 1, height, 1), cols.view(count, 1, 1, width)]
    return crops.float()


def _reflected(index: torch.Tensor, size: int) -> torch.Tensor:
    """Indices off either edge of ``range(size)`` mirrored back inside it, as reflect
    padding does (at most ``size - 1`` off)."""
    index = index.abs()
    return torch.where(index > size - 1, 2 * (size - 1) - index, index)
