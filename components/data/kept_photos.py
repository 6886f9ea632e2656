"""The test split's photo files that preprocess keeps beside the arrays (``test_photos/``,
``00000``, ``00001``, … in the split's order): what binds the arrays to the photos they
were decoded from, and what the gate scores the alias's holder on at its own size."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from components.core.names import TEST_PHOTOS_DIR
from components.data.arrays import photos_sha256
from components.data.images import MAX_FILE_BYTES, decode_bytes

# beside the arrays: the test share's files that did not decode, kept as the test photos
# are, and their names in the source, in order
LEFT_OUT_DIR, LEFT_OUT_NAMES = "test_left_out", "names.json"
# a kept photo decoded again differs from its array by rounding at most; another photo,
# by tens of grey levels on average
MOST_MEAN_DIFFERENCE = 2.0


def kept_files(directory: Path, count: int, start: int = 0) -> list[Path]:
    """The ``count`` kept test photos of the preprocess output ``directory`` from the
    ``start``-th on, in order.

    Raises:
        FileNotFoundError: it keeps none (an older preprocess output).
    """
    folder = Path(directory) / TEST_PHOTOS_DIR
    if not folder.is_dir() or folder.is_symlink():
        raise FileNotFoundError(
            f"expected the test split's photos in {folder} (written by the preprocess step), "
            "found none: preprocess the photos again"
        )
    return [folder / f"{index:05d}" for index in range(start, start + count)]


def left_out_files(directory: Path) -> dict[str, Path]:
    """The test share's files that preprocess kept but did not decode, by their names in
    the source (``LEFT_OUT_NAMES``); none for an output that lists none.

    Raises:
        ValueError: the list is not one of names (or over a megabyte a thousand files).
    """
    folder = Path(directory) / LEFT_OUT_DIR
    try:
        with _opened_kept(folder / LEFT_OUT_NAMES) as handle:
            names = json.loads(handle.read())
    except ValueError as err:
        if not (folder / LEFT_OUT_NAMES).exists():
            return {}
        raise ValueError(f"expected the names of the files preprocess left out: {err}") from None
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        raise ValueError(f"expected a list of names in {folder / LEFT_OUT_NAMES}")
    return {name: folder / f"{i:05d}" for i, name in enumerate(names)}


def read_kept(file: Path) -> bytes:
    """A kept photo's bytes: a regular file of its folder, at most a photo's size.

    Raises:
        ValueError: missing, a link, a folder or device, or larger than a photo.
    """
    with _opened_kept(file) as handle:
        return handle.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES]


def kept_sha256(file: Path) -> str:
    """A kept photo's sha256, read a block at a time: its bytes are never held whole.

    Raises:
        ValueError: as ``read_kept``.
    """
    with _opened_kept(file) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _opened_kept(file: Path) -> io.BufferedReader:
    """The kept photo ``file`` opened, once it is a regular file of at most a photo's size,
    checked on what was opened (a link is not followed)."""
    try:
        handle = open(os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK), "rb")
    except FileNotFoundError:
        raise _not_kept(file, "nothing") from None
    except OSError as err:  # a link (O_NOFOLLOW), or unreadable
        raise _not_kept(file, "a link" if err.errno == errno.ELOOP else "another") from None
    info = os.fstat(handle.fileno())
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
        handle.close()
        raise _not_kept(file, "another")
    return handle


def _not_kept(file: Path, found: str) -> ValueError:
    return ValueError(
        f"expected {file} to be a kept test photo (a regular file of at most "
        f"{MAX_FILE_BYTES // 2**20} MiB), found {found}"
    )


def decoded(data: bytes, file: Path, size: int, channels: int) -> np.ndarray:
    """A kept photo's pixels, as preprocess decodes them, at ``size`` and ``channels``.

    Raises:
        ValueError: it does not decode.
    """
    try:
        return decode_bytes(data, size, channels)
    except ValueError as err:
        raise ValueError(f"expected {file} to decode as it did in preprocess: {err}") from None


def replace_with_kept_photos(directory: Path, images: np.ndarray, labels: np.ndarray) -> str:
    """The photos digest of the kept test photos, once each decodes to its array's pixels
    (``replace_batch_with_kept_photos`` on the whole split)."""
    return photos_sha256(replace_batch_with_kept_photos(directory, images, labels, 0))


def replace_batch_with_kept_photos(
    directory: Path, images: np.ndarray, labels: np.ndarray, start: int
) -> list[tuple[str, int]]:
    """The sha256 and label of each kept test photo of a batch of the test arrays (from
    the ``start``-th on), once each decodes to its array's pixels (the arrays are these
    photos, whatever ``meta.json`` says), each array's pixels replaced, in place, by its
    photo's decoded again: what is then scored is the photos themselves, never arrays
    that are only within a tolerance of them (a few grey levels nudged toward each label
    would pass the check).

    Raises:
        FileNotFoundError: no kept photos.
        ValueError: a kept photo that is not its array's (another photo, or none).
    """
    read = []
    checked = _checked(directory, images, labels, start)
    for position, (pixels, digest, label) in enumerate(checked):
        images[position] = pixels
        read.append((digest, int(label)))
    return read


def _checked(
    directory: Path, images: np.ndarray, labels: np.ndarray, start: int
) -> Iterator[tuple[np.ndarray, str, int]]:
    """Each kept photo's pixels at the arrays' size, its sha256 and label, once it is
    within ``MOST_MEAN_DIFFERENCE`` of its array."""
    files = kept_files(directory, len(labels), start)
    size, channels = images.shape[-1], images.shape[1]
    for file, pixels, label in zip(files, images, labels, strict=True):
        data = read_kept(file)
        again = decoded(data, file, size, channels)
        difference = float(np.abs(again.astype(np.int16) - pixels.astype(np.int16)).mean())
        if difference > MOST_MEAN_DIFFERENCE:
            raise ValueError(
                f"expected {file} to be the photo of its place in the test arrays, found one "
                f"{difference:.0f} grey levels away on average: the arrays are not the photos "
                "kept beside them"
            )
        yield again, hashlib.sha256(data).hexdigest(), int(label)
