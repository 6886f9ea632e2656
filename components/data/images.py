"""Decode one image file by its content into a small square uint8 array."""

from __future__ import annotations

import hashlib
import io
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

MODES = {1: "L", 3: "RGB"}
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp", ".tif", ".tiff"}
# what a photo comes as (JPEG includes a camera's MPO); never a format whose decoder
# runs a program (EPS runs Ghostscript) or that only crafted files use
PHOTO_FORMATS = ("JPEG", "PNG", "GIF", "BMP", "WEBP", "TIFF")


@dataclass(frozen=True)
class Decoded:
    """One file's outcome: pixels C×H×W and the bytes' digest, or why it was skipped."""

    pixels: np.ndarray | None
    sha256: str | None
    reason: str | None = None


MAX_FILE_BYTES = 64 * 1024**2  # far above any photo; a larger file is skipped unread
# about a 48-megapixel photo, after a JPEG's reduced-size decode; a few kilobytes of PNG
# can claim far more, and each decoding process would hold it whole in memory
MAX_PIXELS = 50_000_000
WIDE_MODES = {"I", "I;16", "I;16B", "I;16L", "I;16N", "F"}  # 16-bit, 32-bit int and float


def decode_bytes(data: bytes, size: int, channels: int) -> np.ndarray:
    """Decode image bytes of a photo format, told by content; return uint8 ``channels×size×size``.

    16-bit, 32-bit and floating-point images are scaled to 8 bits, not clipped.

    Raises:
        ValueError: the bytes are not a complete image that PIL can decode, whatever
            the decoder's own error was, or one of more than ``MAX_PIXELS`` pixels
            (``TooManyPixels``, raised before decoding).
    """
    if channels not in MODES:
        raise ValueError(f"expected channels 1 or 3, found {channels}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EXIF and palette chatter, not errors
            with Image.open(io.BytesIO(data), formats=PHOTO_FORMATS) as opened:
                opened.draft(MODES[channels], (size, size))  # JPEG: decode at 1/2..1/8 scale
                _check_pixels(*opened.size)
                image = _to_8_bits(opened) if opened.mode in WIDE_MODES else opened
                image = image.convert(MODES[channels])
                image = image.resize((size, size), Image.Resampling.BILINEAR)
    except UnidentifiedImageError as err:
        raise ValueError(f"not an image in a photo format ({', '.join(PHOTO_FORMATS)})") from err
    except Image.DecompressionBombError as err:  # Pillow's own limit, twice its warning's
        raise TooManyPixels(str(err)) from err
    except TooManyPixels:
        raise
    except Exception as err:  # noqa: BLE001 - a crafted file can make any decoder raise anything
        raise ValueError(f"truncated or corrupt image data ({type(err).__name__}: {err})") from err
    pixels = np.asarray(image, dtype=np.uint8)
    return pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)


class TooManyPixels(ValueError):
    """An image larger than any photo: skipped before it is decoded."""


def _check_pixels(width: int, height: int) -> None:
    if width * height > MAX_PIXELS:
        raise TooManyPixels(
            f"{width}×{height} pixels, over the {MAX_PIXELS:,}-pixel limit for a photo"
        )


def _to_8_bits(image: Image.Image) -> Image.Image:
    """A wide grey image as 8-bit grey: 16-bit ranges scaled by 1/257, floats by their range."""
    values = np.asarray(image, dtype=np.float64)
    if image.mode == "F":
        low, high = (
            (0.0, 1.0) if values.min() >= 0 and values.max() <= 1 else (values.min(), values.max())
        )
    else:
        low, high = 0.0, 65535.0
    scaled = (values - low) / max(high - low, 1e-12) * 255.0
    return Image.fromarray(np.clip(np.round(scaled), 0, 255).astype(np.uint8), "L")


def decode_file(path: Path, size: int, channels: int) -> Decoded:
    """Read and decode ``path``; a broken file becomes a ``Decoded`` with a reason."""
    path = Path(path)
    length = path.stat().st_size
    if length == 0:
        return Decoded(None, None, "empty file (0 bytes)")
    if length > MAX_FILE_BYTES:
        return Decoded(
            None, None, f"{length} bytes, over the {MAX_FILE_BYTES}-byte limit for a photo"
        )
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    try:
        return Decoded(decode_bytes(data, size, channels), digest)
    except ValueError as err:
        return Decoded(None, digest, str(err))
