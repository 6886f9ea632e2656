"""Device-side batches: shuffled coverage, flips and crops."""

from __future__ import annotations

import torch

from components.training.batches import DeviceSplit, augment


def test_batches_cover_every_sample_once_when_shuffled():
    data = DeviceSplit(torch.arange(10, dtype=torch.uint8).view(10, 1, 1, 1), torch.arange(10))
    seen = torch.cat([y for _, y in data.batches(3, torch.Generator().manual_seed(0))])
    assert sorted(seen.tolist()) == list(range(10)) and seen.tolist() != list(range(10))


def test_augment_flips_and_crops_deterministically():
    pixels = torch.arange(2 * 1 * 8 * 8, dtype=torch.float32).view(2, 1, 8, 8).to(torch.uint8)
    first = augment(pixels, torch.Generator().manual_seed(1), crop_padding=2)
    again = augment(pixels, torch.Generator().manual_seed(1), crop_padding=2)
    assert first.shape == (2, 1, 8, 8) and torch.equal(first, again)
    flipped_only = augment(pixels, torch.Generator().manual_seed(1))
    for original, out in zip(pixels.float(), flipped_only, strict=True):
        assert torch.equal(out, original) or torch.equal(out, original.flip(2))


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
