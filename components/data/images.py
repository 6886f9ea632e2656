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
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png", ".gif", ".bmp", ".webp"}


@dataclass(frozen=True)
class Decoded:
    """One file's outcome: pixels C×H×W and the bytes' digest, or why it was skipped."""

    pixels: np.ndarray | None
    sha256: str | None
    reason: str | None = None


def decode_bytes(data: bytes, size: int, channels: int) -> np.ndarray:
    """Decode image bytes of any format PIL reads; return uint8 ``channels×size×size``.

    Raises ``ValueError`` for bytes that are not a complete image.
    """
    if channels not in MODES:
        raise ValueError(f"expected channels 1 or 3, found {channels}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EXIF and palette chatter, not errors
            with Image.open(io.BytesIO(data)) as opened:
                opened.draft(MODES[channels], (size, size))  # JPEG: decode at 1/2..1/8 scale
                image = opened.convert(MODES[channels])
                image = image.resize((size, size), Image.Resampling.BILINEAR)
    except UnidentifiedImageError as err:
        raise ValueError("not an image (unrecognised format)") from err
    except (OSError, SyntaxError, Image.DecompressionBombError) as err:
        raise ValueError(f"truncated or corrupt image data: {err}") from err
    pixels = np.asarray(image, dtype=np.uint8)
    return pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)


def decode_file(path: Path, size: int, channels: int) -> Decoded:
    """Read and decode ``path``; a broken file becomes a ``Decoded`` with a reason."""
    data = Path(path).read_bytes()
    if not data:
        return Decoded(None, None, "empty file (0 bytes)")
    digest = hashlib.sha256(data).hexdigest()
    try:
        return Decoded(decode_bytes(data, size, channels), digest)
    except ValueError as err:
        return Decoded(None, digest, str(err))
