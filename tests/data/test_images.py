"""Decoding hostile and unusual image files: skipped with a reason, or scaled, never fatal."""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import threading
import time
import zipfile

import numpy as np
import pytest
from PIL import Image

from components.data import images
from tests.support.helpers import png_of_zeros
from tests.support.processes import START_HANG_SECONDS


def encoded(array: np.ndarray, fmt: str, mode: str | None = None) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array, mode).save(buffer, fmt)
    return buffer.getvalue()


def test_a_16_bit_image_is_scaled_to_8_bits_not_clipped():
    grey = np.full((40, 40), 32896, np.uint16)  # mid-grey in 16 bits: 128 × 257
    pixels = images.decode_bytes(encoded(grey, "PNG"), 20, 1)
    assert pixels.shape == (1, 20, 20) and int(pixels.mean()) == 128


def test_a_float_image_is_scaled_by_its_range():
    ramp = np.tile(np.linspace(0.0, 1.0, 64, dtype=np.float32), (64, 1))
    pixels = images.decode_bytes(encoded(ramp, "TIFF", "F"), 64, 1)
    assert pixels[0, 0, 0] == 0 and pixels[0, 0, -1] == 255


def test_a_file_too_large_for_a_photo_is_skipped_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(images, "MAX_FILE_BYTES", 1000)
    path = tmp_path / "huge.jpg"
    path.write_bytes(encoded(np.zeros((64, 64, 3), np.uint8), "BMP"))  # 12 KB
    result = images.decode_file(path, 16, 1)
    assert result.pixels is None and "over the 1000-byte limit" in result.reason


@pytest.mark.parametrize(
    "side, reason",
    [
        (8_000, "8000×8000 pixels, over the 50,000,000-pixel limit for a photo"),
        (14_000, "Image size (196000000 pixels) exceeds limit"),  # Pillow's own, at 2× its 89M
    ],
)
def test_an_image_of_more_pixels_than_a_photo_is_skipped_undecoded(tmp_path, side, reason):
    data = png_of_zeros(side, side)
    assert len(data) < 300_000  # kilobytes that would decode to 64-196 MB per process
    (tmp_path / "bomb.png").write_bytes(data)
    result = images.decode_file(tmp_path / "bomb.png", 50, 3)
    assert result.pixels is None and result.reason.startswith(reason)


def test_corrupted_files_of_every_format_are_skipped_with_a_reason(tmp_path):
    """Seeded byte mutations of small real files: whatever a decoder raises, only skip."""
    array = (np.arange(32 * 32 * 3) % 251).astype(np.uint8).reshape(32, 32, 3)
    seeds = [encoded(array, fmt) for fmt in ("PNG", "GIF", "BMP", "TIFF", "WEBP", "JPEG", "ICO")]
    rng = random.Random(0)
    reasons = set()
    for i in range(1500):
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        path = tmp_path / f"{i}.jpg"
        path.write_bytes(bytes(data))
        result = images.decode_file(path, 16, 3)  # must not raise
        if result.pixels is None:
            reasons.add(result.reason.split(" (")[0])
        else:
            assert result.pixels.shape == (3, 16, 16) and result.pixels.dtype == np.uint8
    assert "not an image" in " ".join(reasons) and "truncated or corrupt" in " ".join(reasons)


@pytest.mark.parametrize("channels", [1, 3])
def test_palette_and_alpha_images_decode(channels):
    rgba = np.zeros((20, 20, 4), np.uint8)
    rgba[..., 0], rgba[..., 3] = 200, 255
    assert images.decode_bytes(encoded(rgba, "PNG"), 10, channels).shape == (channels, 10, 10)
    palette = Image.fromarray(rgba[..., :3]).convert("P")
    buffer = io.BytesIO()
    palette.save(buffer, "GIF")
    assert images.decode_bytes(buffer.getvalue(), 10, channels).shape == (channels, 10, 10)


def test_a_postscript_file_named_jpg_never_reaches_ghostscript(tmp_path, monkeypatch):
    """Pillow hands EPS files to Ghostscript: a program run on the file's say-so."""
    from PIL import EpsImagePlugin

    witness = tmp_path / "ghostscript-ran"
    fake = tmp_path / "bin/gs"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\ntouch {witness}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{os.environ['PATH']}")
    monkeypatch.setattr(EpsImagePlugin, "gs_binary", None)  # look for gs again, on this PATH
    photo = tmp_path / "1.jpg"
    photo.write_bytes(b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\nshowpage\n%%EOF\n")
    result = images.decode_file(photo, 16, 1)
    assert result.pixels is None and result.reason.startswith("not an image in a photo format")
    assert not witness.exists()


def test_an_image_that_would_take_too_much_memory_to_decode_is_refused_before_decoding():
    # 7000×7000 at 16 bits: 49 million pixels, under the pixel limit, in about 100 KB;
    # decoded and scaled it would hold about half a GiB
    bomb = png_of_zeros(7000, 7000, bit_depth=16)
    assert len(bomb) < 200_000
    with pytest.raises(images.TooManyPixels, match="mode I;16 would take 467 MiB to decode"):
        images.decode_bytes(bomb, 40, 1)
    assert images.DECODING.used == 0  # nothing held after the refusal
    small = images.decode_bytes(png_of_zeros(2000, 2000, bit_depth=16), 40, 1)
    assert small.shape == (1, 40, 40) and not small.any()


def test_decodes_at_once_share_one_memory_budget():
    budget = images.MemoryBudget(total=100)
    order: list[str] = []

    def second() -> None:
        with budget.hold(50):
            order.append("second")

    with budget.hold(70):
        waiting = threading.Thread(target=second)
        waiting.start()
        wait_until_blocked(budget, waiting)
        assert order == [] and budget.used == 70  # the second waits while 70 + 50 > 100
        order.append("first done")
    waiting.join(timeout=START_HANG_SECONDS)  # a deadlock, not a busy machine, reaches it
    assert order == ["first done", "second"] and budget.used == 0


def wait_until_blocked(budget: images.MemoryBudget, thread: threading.Thread) -> None:
    """Return once ``thread`` waits on ``budget``'s condition (CPython keeps a lock for
    each waiter); fail if it ends first or does not wait within the hang bound."""
    deadline = time.monotonic() + START_HANG_SECONDS
    while not budget._changed._waiters:  # type: ignore[attr-defined]
        assert thread.is_alive(), "the second decode ran without waiting for its share"
        assert time.monotonic() < deadline, "the second decode never reached the budget"
        time.sleep(0.01)


def test_the_pixels_a_decode_makes_are_read_from_the_header_a_jpeg_at_its_reduced_size():
    buffer = io.BytesIO()
    Image.new("RGB", (4000, 3000), (120, 80, 40)).save(buffer, "JPEG")
    assert images.decode_pixels(buffer.getvalue(), 40, 3) == 500 * 375  # drafted to 1/8
    assert images.decode_pixels(png_of_zeros(7000, 7000), 40, 1) == 49_000_000
    with pytest.raises(ValueError, match="not an image in a photo format"):
        images.decode_pixels(b"plain text", 40, 1)


def pillow_decode(data: bytes, size: int, channels: int, monkeypatch) -> np.ndarray:
    """What ``decode_bytes`` gives with Pillow alone deciding, its JPEG path off."""
    with monkeypatch.context() as patch:
        patch.setattr(images, "_decode_jpeg", lambda *args: None)
        return images.decode_bytes(data, size, channels)


@pytest.mark.parametrize("size, channels", [(50, 1), (64, 3), (128, 3)])
def test_real_jpegs_are_decoded_by_libjpeg_turbo_to_the_pixels_pillow_makes(
    sample_zip, size, channels, monkeypatch
):
    with zipfile.ZipFile(sample_zip) as archive:
        names = [n for n in archive.namelist() if n.lower().endswith(".jpg")][::10]
        photos = [archive.read(name) for name in names]
    compared = 0
    for photo in photos:
        try:
            structure = images.check_jpeg(photo)
        except ValueError:
            continue  # broken: named, never decoded
        if images._decode_jpeg(photo, size, channels, structure) is None:
            continue  # broken, or not a JPEG inside: Pillow's to decide, below
        expected = pillow_decode(photo, size, channels, monkeypatch)
        assert np.array_equal(images.decode_bytes(photo, size, channels), expected)
        compared += 1
    assert compared >= 0.95 * len(photos)


def test_what_libjpeg_turbo_leaves_is_decoded_or_named_by_pillow_as_before(monkeypatch):
    cmyk = io.BytesIO()
    Image.new("CMYK", (80, 60), (10, 200, 30, 0)).save(cmyk, "JPEG")
    rgb = encoded((np.arange(80 * 60 * 3) % 251).astype(np.uint8).reshape(60, 80, 3), "JPEG")
    for data in (cmyk.getvalue(), rgb[: len(rgb) // 2]):  # CMYK; a truncated file
        with contextlib.suppress(ValueError):  # cut inside its markers: named at once
            assert images._decode_jpeg(data, 20, 3, images.check_jpeg(data)) is None
    pixels = images.decode_bytes(cmyk.getvalue(), 20, 3)
    assert np.array_equal(pixels, pillow_decode(cmyk.getvalue(), 20, 3, monkeypatch))
    with pytest.raises(ValueError, match="truncated or corrupt image data"):
        images.decode_bytes(rgb[: len(rgb) // 2], 20, 3)


@pytest.mark.parametrize(
    "side, size, reason",
    [
        (13_000, 8_000, "13000×13000 pixels, over the 50,000,000-pixel limit"),  # at full size
        (20_000, 50, re.escape("Image size (400000000 pixels) exceeds limit")),  # Pillow's
    ],
)
def test_a_jpeg_header_claiming_more_than_a_photo_is_refused_before_decoding(side, size, reason):
    small = bytearray(encoded(np.zeros((16, 16), np.uint8), "JPEG"))
    start = small.index(b"\xff\xc0") + 5  # the frame header: precision, then height, width
    small[start : start + 4] = side.to_bytes(2, "big") * 2
    # as much image data as a photo of that size would hold at the least: not a liar
    small[-2:-2] = bytes(side * side // 64)
    with pytest.raises(images.TooManyPixels, match=reason):
        images.decode_bytes(bytes(small), size, 1)
    assert images.DECODING.used == 0
