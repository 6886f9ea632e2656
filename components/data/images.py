"""Decode one image file by its content into a small square uint8 array."""

from __future__ import annotations

import contextlib
import hashlib
import io
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import simplejpeg
from PIL import Image, UnidentifiedImageError

from components.data.jpeg import ARITHMETIC, JpegStructure, read_structure

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
# memory one decode may take: a 48-megapixel RGB photo (Pillow keeps 4 bytes a pixel) fits;
# a 7000×7000 16-bit PNG of 95 KB does not. All decodes at once share twice that.
MAX_DECODED_BYTES = 256 * 1024**2
MIB = 1024**2
# a progressive or multi-scan JPEG's decoding work, in blocks × scans: about 18 times a
# 48-megapixel progressive photo's (1.1 million blocks, 10 scans), a second or two of CPU
MAX_BLOCK_SCANS = 200_000_000
# entropy-coded bytes a JPEG needs at the least for its first component's blocks: each
# block's DC term takes a bit or more, in any coding; half that is a header's lie
LEAST_BITS_A_BLOCK = 0.5


class MemoryBudget:
    """Bytes that decodes running at once may hold between them: a decode waits for its
    share, so that concurrent decodes (a server's requests, a step's threads) cannot add up
    past ``total``."""

    def __init__(self, total: int):
        self.total, self.used = total, 0
        self._changed = threading.Condition()

    @contextlib.contextmanager
    def hold(self, count: int) -> Iterator[None]:
        with self._changed:
            self._changed.wait_for(lambda: self.used + count <= self.total)
            self.used += count
        try:
            yield
        finally:
            with self._changed:
                self.used -= count
                self._changed.notify_all()


DECODING = MemoryBudget(2 * MAX_DECODED_BYTES)


def decode_bytes(data: bytes, size: int, channels: int) -> np.ndarray:
    """Decode image bytes of a photo format, told by content; return uint8 ``channels×size×size``.

    16-bit, 32-bit and floating-point images are scaled to 8 bits, not clipped.

    Raises:
        ValueError: the bytes are not a complete image that PIL can decode, whatever
            the decoder's own error was, or one of more than ``MAX_PIXELS`` pixels
            (``TooManyPixels``, raised before decoding).
    """
    structure = check_jpeg(data)
    image = _decode_jpeg(data, size, channels, structure)
    if image is None:  # not a JPEG libjpeg-turbo takes as it is: Pillow decides
        with _opened(data, size, channels) as opened:
            _check_pixels(*opened.size)
            coefficients = structure.coefficient_bytes if structure else 0
            with DECODING.hold(_decoded_bytes(opened.mode, *opened.size, coefficients)):
                image = _to_8_bits(opened) if opened.mode in WIDE_MODES else opened
                image = image.convert(MODES[channels])
    image = image.resize((size, size), Image.Resampling.BILINEAR)
    pixels = np.asarray(image, dtype=np.uint8)
    return pixels[None] if channels == 1 else pixels.transpose(2, 0, 1)


def check_jpeg(data: bytes) -> JpegStructure | None:
    """A JPEG's structure, once it shows that decoding it takes what a photo takes; None
    for anything else.

    Raises:
        TooManyPixels: a coefficient buffer over ``MAX_DECODED_BYTES`` or more decoding
            work than ``MAX_BLOCK_SCANS``, from the markers, before any decoder runs.
        ValueError: arithmetic coding (no camera or browser writes it), broken markers,
            or less image data than the header's size needs (a truncated or lying file).
    """
    structure = read_structure(data)
    if structure is None:
        return None
    size = f"{structure.width}×{structure.height}"
    if structure.marker in ARITHMETIC:
        raise ValueError(
            f"an arithmetic-coded JPEG ({size}): a coding no camera or web browser writes"
        )
    if structure.coefficient_bytes > MAX_DECODED_BYTES:
        raise TooManyPixels(
            f"a progressive or multi-scan JPEG of {size} pixels would take "
            f"{structure.coefficient_bytes // MIB} MiB to decode, over the "
            f"{MAX_DECODED_BYTES // MIB} MiB limit for a photo"
        )
    if structure.block_scans > MAX_BLOCK_SCANS:
        raise TooManyPixels(
            f"a JPEG of {size} pixels in {structure.scans} scans: more decoding work than "
            f"a photo takes ({structure.block_scans:,} block scans, the limit "
            f"{MAX_BLOCK_SCANS:,})"
        )
    least = structure.blocks[0] * LEAST_BITS_A_BLOCK / 8
    if structure.entropy_bytes < least:
        raise ValueError(
            f"a truncated or inconsistent JPEG: {structure.entropy_bytes:,} bytes of image "
            f"data cannot hold the {size} pixels its header claims"
        )
    return structure


def _decode_jpeg(
    data: bytes, size: int, channels: int, structure: JpegStructure | None
) -> Image.Image | None:
    """A YCbCr or grey JPEG decoded by libjpeg-turbo alone (simplejpeg, the GIL released),
    at the scale Pillow's draft mode picks and to the same pixels, without Pillow's
    parsing; None for anything else or anything it refuses (CMYK, a truncated file),
    which Pillow then decodes or names.

    Raises:
        TooManyPixels: over the pixel or memory limits, from the header, before decoding.
    """
    if channels not in MODES or structure is None:
        return None  # Pillow's path says what it expected, or what the bytes are
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
    except Exception:  # noqa: BLE001 - not a JPEG it reads: Pillow's to name
        return None
    bomb = Image.MAX_IMAGE_PIXELS  # Pillow refuses to open twice as many, by name
    if (
        colorspace not in ("YCbCr", "Gray")
        or not width * height
        or (bomb and width * height > 2 * bomb)
    ):
        return None  # Pillow decodes other colour spaces, and refuses its bombs
    scale = next((s for s in (8, 4, 2) if min(width // size, height // size) >= s), 1)  # draft's
    reduced = (-(-width // scale), -(-height // scale))
    _check_pixels(*reduced)
    mode = MODES[channels]
    with DECODING.hold(_decoded_bytes(mode, *reduced, structure.coefficient_bytes)):
        try:
            pixels = simplejpeg.decode_jpeg(
                data,
                "GRAY" if channels == 1 else "RGB",
                min_width=reduced[0],
                min_height=reduced[1],
            )
        except Exception:  # noqa: BLE001 - truncated, corrupt: Pillow's to name
            return None
    if pixels.shape[:2] != reduced[::-1]:
        return None
    return Image.fromarray(pixels[:, :, 0] if channels == 1 else pixels, mode)


def decode_pixels(data: bytes, size: int, channels: int) -> int:
    """How many pixels decoding ``data`` would produce (a JPEG at its reduced size), read
    from its header alone: the work a decode will take.

    Raises:
        ValueError: not an image in a photo format, a header that cannot be read, or a
            JPEG that ``check_jpeg`` refuses.
    """
    check_jpeg(data)
    with _opened(data, size, channels) as opened:
        width, height = opened.size
    return width * height


@contextlib.contextmanager
def _opened(data: bytes, size: int, channels: int) -> Iterator[Image.Image]:
    """The image in ``data``, opened lazily by content (a JPEG set to decode at 1/2 to 1/8
    scale); whatever the opener or the decoder raise inside the block comes out as a
    ``ValueError`` that says what the bytes are not, the pixel limits as ``TooManyPixels``."""
    if channels not in MODES:
        raise ValueError(f"expected channels 1 or 3, found {channels}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # EXIF and palette chatter, not errors
            with Image.open(io.BytesIO(data), formats=PHOTO_FORMATS) as opened:
                opened.draft(MODES[channels], (size, size))
                yield opened
    except UnidentifiedImageError as err:
        raise ValueError(f"not an image in a photo format ({', '.join(PHOTO_FORMATS)})") from err
    except Image.DecompressionBombError as err:  # Pillow's own limit, twice its warning's
        raise TooManyPixels(str(err)) from err
    except TooManyPixels:
        raise
    except Exception as err:  # noqa: BLE001 - a crafted file can make any decoder raise anything
        raise ValueError(f"truncated or corrupt image data ({type(err).__name__}: {err})") from err


class TooManyPixels(ValueError):
    """An image larger than any photo: skipped before it is decoded."""


def _check_pixels(width: int, height: int) -> None:
    if width * height > MAX_PIXELS:
        raise TooManyPixels(
            f"{width}×{height} pixels, over the {MAX_PIXELS:,}-pixel limit for a photo"
        )


def _decoded_bytes(mode: str, width: int, height: int, coefficients: int = 0) -> int:
    """What decoding an image of ``mode`` and size holds at its peak: Pillow's pixels (4
    bytes each for RGB and the like), the 8-bit grey or RGB it becomes, for a wide mode
    the float32 copy it is scaled in, and a JPEG's coefficient buffer, if it has one.

    Raises:
        TooManyPixels: more than ``MAX_DECODED_BYTES``.
    """
    pixels = width * height
    if Image.getmodebands(mode) > 1 or mode in ("I", "F"):
        stored = 4  # Pillow keeps several bands, and 32-bit values, in 4 bytes a pixel
    else:
        stored = 2 if mode in WIDE_MODES else 1
    needed = pixels * (stored + 4 + (4 if mode in WIDE_MODES else 0)) + coefficients
    if needed > MAX_DECODED_BYTES:
        raise TooManyPixels(
            f"{width}×{height} pixels of mode {mode} would take {needed // MIB} MiB to decode, "
            f"over the {MAX_DECODED_BYTES // MIB} MiB limit for a photo"
        )
    return needed


def _to_8_bits(image: Image.Image) -> Image.Image:
    """A wide grey image as 8-bit grey: 16-bit ranges scaled by 1/257, floats by their
    range; one float32 copy, scaled in place."""
    values = np.asarray(image, dtype=np.float32).copy()
    if image.mode == "F":
        low, high = (
            (0.0, 1.0) if values.min() >= 0 and values.max() <= 1 else (values.min(), values.max())
        )
    else:
        low, high = 0.0, 65535.0
    values -= low
    values *= 255.0 / max(float(high) - float(low), 1e-12)
    np.clip(np.round(values, out=values), 0, 255, out=values)
    return Image.fromarray(values.astype(np.uint8), "L")


def read_photo(path: Path) -> tuple[bytes | None, str | None]:
    """A photo file's bytes, or None and why it is skipped unread (empty, too large)."""
    length = Path(path).stat().st_size
    if length == 0:
        return None, "empty file (0 bytes)"
    if length > MAX_FILE_BYTES:
        return None, f"{length} bytes, over the {MAX_FILE_BYTES}-byte limit for a photo"
    return Path(path).read_bytes(), None


def digest_file(path: Path) -> Decoded:
    """A photo file's sha256 without decoding it, or why it is skipped unread."""
    data, reason = read_photo(path)
    if data is None:
        return Decoded(None, None, reason)
    return Decoded(None, hashlib.sha256(data).hexdigest())


def decode_file(path: Path, size: int, channels: int) -> Decoded:
    """Read and decode ``path``; a broken file becomes a ``Decoded`` with a reason."""
    data, reason = read_photo(path)
    if data is None:
        return Decoded(None, None, reason)
    digest = hashlib.sha256(data).hexdigest()
    try:
        return Decoded(decode_bytes(data, size, channels), digest)
    except ValueError as err:
        return Decoded(None, digest, str(err))
