"""Device-side batches: shuffled coverage, flips, crops, CutMix and progressive resizing."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from components.data.shards import MappedSplit, write_shard
from components.training.batches import (
    DeviceSplit,
    _crop_image_by_image,
    _crop_in_one_gather,
    augment,
    cutmix,
    downscale,
    epoch_side,
)


def test_batches_cover_every_sample_once_when_shuffled():
    data = DeviceSplit(torch.arange(10, dtype=torch.uint8).view(10, 1, 1, 1), torch.arange(10))
    seen = torch.cat([y for _, y in data.batches(3, torch.Generator().manual_seed(0))])
    assert sorted(seen.tolist()) == list(range(10)) and seen.tolist() != list(range(10))


def split_on_disk(tmp_path, count: int = 23) -> tuple[DeviceSplit, DeviceSplit]:
    """The same photos held in memory and read from three shards on disk."""
    images = torch.randint(0, 256, (count, 3, 4, 4), dtype=torch.uint8)
    labels = torch.arange(count) % 2
    shards = []
    for index, start in enumerate(range(0, count, 9)):  # 9, 9, then 5
        record = write_shard(
            tmp_path, "train", index, images[start : start + 9].numpy(),
            labels[start : start + 9].numpy(),
        )  # fmt: skip
        shards.append(np.load(tmp_path / record["images"], mmap_mode="r"))
    on_disk = DeviceSplit(MappedSplit(shards, labels.numpy()), labels)
    return DeviceSplit(images, labels), on_disk


def test_a_split_read_from_its_shards_gives_the_batches_one_held_whole_gives(tmp_path):
    whole, on_disk = split_on_disk(tmp_path)
    for generator_seed, rank, world_size in ((None, 0, 1), (4, 0, 1), (5, 1, 2)):
        batches = [
            split.batches(4, generator_seed and torch.Generator().manual_seed(generator_seed),
                          rank, world_size)
            for split in (whole, on_disk)
        ]  # fmt: skip
        for (a, y_a), (b, y_b) in itertools.zip_longest(*batches):
            assert torch.equal(a, b) and torch.equal(y_a, y_b)
    picked, picked_on_disk = whole.pick(7, seed=2), on_disk.pick(7, seed=2)
    assert torch.equal(picked.images, picked_on_disk.take(slice(None)))
    share, share_on_disk = whole.shard(1, 3), on_disk.shard(1, 3)
    assert torch.equal(share.images, share_on_disk.take(torch.arange(len(share_on_disk))))
    assert on_disk.resident_bytes == 0 and whole.resident_bytes == whole.images.nbytes


def test_augment_flips_and_crops_deterministically():
    pixels = torch.arange(2 * 1 * 8 * 8, dtype=torch.float32).view(2, 1, 8, 8).to(torch.uint8)
    first = augment(pixels, torch.Generator().manual_seed(1), crop_padding=2)
    again = augment(pixels, torch.Generator().manual_seed(1), crop_padding=2)
    assert first.shape == (2, 1, 8, 8) and torch.equal(first, again)
    flipped_only = augment(pixels, torch.Generator().manual_seed(1))
    for original, out in zip(pixels.float(), flipped_only, strict=True):
        assert torch.equal(out, original) or torch.equal(out, original.flip(2))


@pytest.mark.parametrize("padding", [1, 3, 12])
def test_shifted_crops_are_the_mirrored_padded_photo_cut_at_the_drawn_shift(padding):
    pixels = torch.randint(0, 256, (16, 3, 20, 33), dtype=torch.uint8)
    out = augment(pixels, torch.Generator().manual_seed(4), crop_padding=padding)
    draws = torch.Generator().manual_seed(4)  # the same draws, in augment's order
    flip = torch.rand(16, generator=draws) < 0.5
    dy = torch.randint(0, 2 * padding + 1, (16,), generator=draws)
    dx = torch.randint(0, 2 * padding + 1, (16,), generator=draws)
    mirrored = torch.where(flip.view(-1, 1, 1, 1), pixels.flip(3), pixels).float()
    padded = F.pad(mirrored, (padding,) * 4, mode="reflect")
    for index in range(16):
        top, left = int(dy[index]), int(dx[index])
        assert torch.equal(out[index], padded[index, :, top : top + 20, left : left + 33])
    assert out.dtype == torch.float32 and bool(flip.any()) and not bool(flip.all())


def test_the_gpus_one_gather_cuts_the_same_crops_as_the_cpus_copies():
    pixels = torch.randint(0, 256, (9, 3, 20, 33), dtype=torch.uint8)
    draws = torch.Generator().manual_seed(3)
    flip = torch.rand(9, generator=draws) < 0.5
    for padding in (0, 3, 12):
        dy, dx = torch.randint(0, 2 * padding + 1, (2, 9), generator=draws)
        by_image = _crop_image_by_image(pixels, flip, dy, dx, padding)
        assert torch.equal(_crop_in_one_gather(pixels, flip, dy, dx, padding), by_image)


def test_random_resized_crops_zoom_into_a_box_of_at_least_the_asked_area():
    ramp = torch.arange(32, dtype=torch.float32).mul(8).expand(64, 3, 32, 32).to(torch.uint8)
    first = augment(ramp, torch.Generator().manual_seed(2), min_crop_area=0.25)
    again = augment(ramp, torch.Generator().manual_seed(2), min_crop_area=0.25)
    assert first.shape == ramp.shape and torch.equal(first, again)
    # axis-aligned: every column stays constant and every row monotonic, rising where the
    # image was kept and falling where it was flipped; both happen (p = 0.5 each)
    assert torch.allclose(first, first[:, :, :1, :].expand_as(first), atol=1e-3)
    steps = first[:, 0, 0, 1:] - first[:, 0, 0, :-1]
    rising, falling = (steps >= -1e-3).all(1), (steps <= 1e-3).all(1)
    assert (rising | falling).all()
    assert 16 <= int((falling & ~rising).sum()) <= 48 and 16 <= int((rising & ~falling).sum())
    # a box at least sqrt(0.25 * 3/4) of the width wide, scaled up, inside the image
    spans = first[:, 0, 0, :].amax(1) - first[:, 0, 0, :].amin(1)
    assert spans.min() >= 0.43 * 248 * 31 / 32 - 8 and first.min() >= 0 and first.max() <= 248
    assert (spans < 200).float().mean() > 0.5  # most crops zoom in


def test_cutmix_pastes_one_box_of_each_partner_and_weights_by_what_is_left():
    # image i is filled with the value i: every pixel says which image it came from
    pixels = torch.arange(8, dtype=torch.float32).view(8, 1, 1, 1).expand(8, 3, 20, 20)
    mixed, partner, own = cutmix(pixels, torch.Generator().manual_seed(3), random.Random(3))
    assert sorted(partner.tolist()) == list(range(8))
    for index in range(8):
        from_partner = mixed[index] == partner[index]
        if partner[index] != index and from_partner.any():
            assert torch.equal(mixed[index][~from_partner], pixels[index][~from_partner])
            rows, cols = from_partner[0].nonzero().unbind(1)
            box = (rows.max() - rows.min() + 1) * (cols.max() - cols.min() + 1)
            assert box == from_partner[0].sum()  # one rectangle, the same on every channel
            assert torch.equal(from_partner, from_partner[:1].expand(3, 20, 20))
            assert own == pytest.approx(1 - box.item() / 400)
    assert torch.equal(pixels[:, 0, 0, 0], torch.arange(8.0))  # the input is left as it was


def test_progressive_resizing_grows_in_steps_of_8_to_the_full_side_by_the_last_epoch():
    sides = [epoch_side(96, 48, epoch, 24) for epoch in range(1, 25)]
    assert sides[0] == 48 and sides[-1] == 96
    assert {b - a for a, b in itertools.pairwise(sides)} <= {0, 8}  # grows in steps of 8
    assert [epoch_side(50, 20, epoch, 10) for epoch in (1, 10)] == [20, 50]  # capped at 50
    assert {epoch_side(96, 0, epoch, 24) for epoch in range(1, 25)} == {96}  # off
    assert epoch_side(96, 48, 1, 1) == 96  # a single epoch trains at the full side


def test_downscale_shrinks_with_antialiasing_and_keeps_the_full_side_as_it_is():
    stripes = torch.tensor([0.0, 255.0]).repeat(48).expand(2, 3, 96, 96)  # 1-pixel stripes
    small = downscale(stripes, 48)
    assert small.shape == (2, 3, 48, 48)
    assert small.min() > 100 and small.max() < 155  # averaged to grey, not aliased
    assert downscale(stripes, 96) is stripes
