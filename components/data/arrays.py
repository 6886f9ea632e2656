"""Read and write the preprocessed arrays and ``meta.json``: the data contract between steps."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import string
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from components.core.errors import brief
from components.data.classes import check_classes

SPLITS = ("train", "val", "test")
META = "meta.json"
MIN_IMAGE_SIZE = 8
MAX_IMAGE_SIZE = 512  # PetImages photos are about 500×375; larger only wastes memory
IMAGE_FIELDS = ("classes", "channels", "image_size", "mean", "std")
HEX = frozenset(string.hexdigits.lower())


def save_split(
    directory: Path,
    split: str,
    images: np.ndarray,
    labels: np.ndarray,
    rows: np.ndarray | None = None,
    chunk_bytes: int = 8 * 2**20,
) -> None:
    """Save ``{split}_images.npy`` (uint8 N×C×H×W) and ``{split}_labels.npy`` (int64 N):
    the ``rows`` of ``images`` and ``labels`` (all without), written about ``chunk_bytes``
    at a time, so saving a split never holds a second copy of it, and synced to disk."""
    rows = np.arange(len(images)) if rows is None else rows
    chunk = max(1, chunk_bytes // max(1, int(np.prod(images.shape[1:]))))
    header = {"descr": "|u1", "fortran_order": False, "shape": (len(rows), *images.shape[1:])}
    with _synced(directory / f"{split}_images.npy") as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        for start in range(0, len(rows), chunk):
            handle.write(np.ascontiguousarray(images[rows[start : start + chunk]], np.uint8).data)
    with _synced(directory / f"{split}_labels.npy") as handle:
        np.save(handle, np.asarray(labels[rows], np.int64), allow_pickle=False)


@contextlib.contextmanager
def _synced(path: Path) -> Iterator[BinaryIO]:
    """``path`` opened for writing, and on disk when the block ends: before the step's
    folder is renamed into place."""
    with open(path, "wb") as handle:
        yield handle
        handle.flush()
        os.fsync(handle.fileno())


def read_meta(directory: Path) -> dict[str, Any]:
    """Read ``meta.json`` and check the fields the other steps rely on.

    Raises:
        FileNotFoundError: there is no ``meta.json``.
        ValueError: it is not JSON, or a field is missing or outside the data contract.
    """
    path = Path(directory) / META
    if not path.is_file():
        raise FileNotFoundError(
            f"expected {META} from the preprocess step in {directory}, found none"
        )
    try:
        meta: dict[str, Any] = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(
            f"expected JSON written by the preprocess step in {path}, found text that is "
            f"not JSON ({err})"
        ) from err
    check_image_spec(meta, path)
    photos = meta.get("photos_sha256", {})
    if not (isinstance(photos, dict) and all(_is_sha256(d) for d in photos.values())):
        raise ValueError(
            f"expected photos_sha256 in {path} as a sha256 (64 hex digits) by split, found "
            f"{brief(photos)}"
        )
    counts = meta.get("counts")
    if not (
        isinstance(counts, dict)
        and set(counts) == set(SPLITS)
        and all(_counts_by_class(by_class, meta["classes"]) for by_class in counts.values())
    ):
        raise ValueError(
            f"expected the count of each class in each split ({', '.join(SPLITS)}) in "
            f"{path}, found {counts!r:.200}"
        )
    return meta


def check_image_spec(spec: object, source: Path | str) -> None:
    """Check what ``meta.json`` and a saved model both describe: classes, shape, mean, std.

    Raises:
        ValueError: ``spec`` is not a mapping, lacks a field, or has one outside the
            data contract; the message names ``source`` and every such field.
    """
    if not isinstance(spec, dict):
        raise ValueError(
            f"expected a mapping of image fields in {source}, found {type(spec).__name__}"
        )
    missing = [field for field in IMAGE_FIELDS if field not in spec]
    if missing:
        raise ValueError(f"expected {', '.join(missing)} in {source}, found no such field")
    channels = spec["channels"]
    problems = shape_problems(channels, spec["image_size"])
    try:
        check_classes(spec["classes"], "classes")
    except ValueError as err:
        problems.append(str(err).removeprefix("expected "))
    if not _fractions(spec["mean"], channels, positive=False):
        problems.append(f"mean: one number in [0, 1] per channel, found {spec['mean']!r:.100}")
    if not _fractions(spec["std"], channels, positive=True):
        problems.append(f"std: one number in (0, 1] per channel, found {spec['std']!r:.100}")
    if problems:
        raise ValueError(f"expected in {source}: " + "; ".join(problems))


def shape_problems(channels: object, size: object) -> list[str]:
    """What is outside the data contract in an image shape: none when it fits."""
    problems = []
    if type(channels) is not int or channels not in (1, 3):
        problems.append(f"channels 1 or 3, found {channels!r:.100}")
    if type(size) is not int or not MIN_IMAGE_SIZE <= size <= MAX_IMAGE_SIZE:
        problems.append(
            f"image_size from {MIN_IMAGE_SIZE} to {MAX_IMAGE_SIZE}, found {size!r:.100}"
        )
    return problems


def _fractions(values: object, count: object, positive: bool) -> bool:
    """Whether ``values`` is a list of ``count`` numbers in [0, 1], or (0, 1] if ``positive``."""
    return (
        isinstance(values, list)
        and len(values) == count
        and all(type(v) in (int, float) and 0 <= v <= 1 for v in values)
        and (not positive or all(v > 0 for v in values))
    )


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and all(c in HEX for c in value)


def _counts_by_class(counts: object, classes: list[str]) -> bool:
    return (
        isinstance(counts, dict)
        and set(counts) == set(classes)
        and all(type(n) is int and n >= 0 for n in counts.values())
    )


def load_split(directory: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Load one split's images and labels, checking they fit the data contract.

    Raises:
        ValueError: an array of the wrong type, or a shape other than ``meta.json``
            says, an empty split, a label that is not the index of a class, or a split
            without a class.
    """
    directory = Path(directory)
    meta = read_meta(directory)
    images = _load_array(directory / f"{split}_images.npy")
    labels = _load_array(directory / f"{split}_labels.npy")
    side = meta["image_size"]
    if images.dtype != np.uint8 or images.shape[1:] != (meta["channels"], side, side):
        raise ValueError(
            f"expected uint8 N×{meta['channels']}×{side}×{side} in "
            f"{directory / f'{split}_images.npy'} (as {META} says), found {images.dtype} "
            f"with shape {images.shape}"
        )
    if labels.dtype != np.int64 or labels.shape != (len(images),):
        raise ValueError(
            f"expected {len(images)} int64 labels in {split}_labels.npy, found "
            f"{labels.dtype} with shape {labels.shape}"
        )
    if len(labels) == 0:
        raise ValueError(f"expected images in the {split} split of {directory}, found none")
    classes = meta["classes"]
    wrong = np.flatnonzero((labels < 0) | (labels >= len(classes)))
    if len(wrong):
        raise ValueError(
            f"expected labels from 0 to {len(classes) - 1} (the classes in {META}) in "
            f"{split}_labels.npy, found {labels[wrong[0]]} at index {wrong[0]} "
            f"({len(wrong)} such labels)"
        )
    counts = np.bincount(labels, minlength=len(classes))
    if counts.min() == 0:
        absent = [name for name, count in zip(classes, counts, strict=True) if count == 0]
        raise ValueError(
            f"expected photos of every class in the {split} split of {directory}, found "
            f"none of {', '.join(absent)[:200]}: a model trained or judged without a class "
            "says nothing of it"
        )
    return images, labels


def photos_sha256(photos: Iterable[tuple[str, int]]) -> str:
    """Which photos a split holds, with their labels, whatever their size or channels: the
    sha256 of its files' sha256s and labels (``photos``: pairs of them), sorted."""
    lines = sorted(f"{digest} {label}" for digest, label in photos)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def split_sha256(images: np.ndarray, labels: np.ndarray) -> str:
    """The sha256 of a split as loaded (which photos, at which size, with which labels),
    every byte counted: what evaluate scored, and what the training run recorded."""
    digest = hashlib.sha256(f"{images.dtype}{images.shape}{labels.dtype}{labels.shape}".encode())
    for array in (images, labels):
        digest.update(np.ascontiguousarray(array).reshape(-1).view(np.uint8).data)
    return digest.hexdigest()


def split_file_sha256(directory: Path, split: str) -> str:
    """``split_sha256`` of a split's files, read through the page cache, not copied in."""
    images, labels = (
        np.load(Path(directory) / f"{split}_{kind}.npy", mmap_mode="r", allow_pickle=False)
        for kind in ("images", "labels")
    )
    return split_sha256(images, labels)


def _load_array(path: Path) -> np.ndarray:
    """Read a plain ``.npy`` array, refusing pickles and files shorter than their header."""
    if not path.is_file():
        raise FileNotFoundError(f"expected {path.name} in {path.parent}, found none")
    try:
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)  # checks the size first
    except ValueError as err:
        if "pickled" in str(err) or "Python objects" in str(err):
            raise ValueError(
                f"refusing {path}: numpy reads it as pickled objects, and loading them could "
                "run code; expected a plain numeric array written by the preprocess step"
            ) from err
        raise ValueError(f"cannot read {path} as a .npy array: {err}") from err
    except EOFError as err:
        raise ValueError(f"cannot read {path} as a .npy array: it ends too soon ({err})") from err
    if not isinstance(mapped, np.ndarray):
        mapped.close()
        raise ValueError(f"expected one .npy array in {path}, found a .npz archive")
    return np.array(mapped)
