"""Read and write the preprocessed arrays and ``meta.json``: the data contract between steps."""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from components.core.errors import brief
from components.data.classes import check_classes
from components.data.shards import (
    SHARD_FIELDS,
    MappedSplit,
    data_blocks,
    file_sha256,
    shard_files,
    write_shard,
)

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
    shard_photos: int = 0,
) -> list[dict[str, Any]]:
    """Save the ``rows`` (all without) of ``images`` (uint8 N×C×H×W) and ``labels``
    (int64 N) as ``split``'s shards of ``shard_photos`` photos each (one shard at 0), never
    holding a second copy of more than one shard.

    Returns:
        Each shard's record, for ``meta.json``'s ``shards``.
    """
    rows = np.arange(len(images)) if rows is None else rows
    per_shard = shard_photos or max(1, len(rows))
    return [
        write_shard(
            directory,
            split,
            index,
            images[rows[start : start + per_shard]],
            labels[rows[start : start + per_shard]],
        )  # fmt: skip
        for index, start in enumerate(range(0, max(1, len(rows)), per_shard))
    ]


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
    _check_shards(meta, path)
    return meta


def _check_shards(meta: dict[str, Any], path: Path) -> None:
    """Each split's shards listed as ``write_shard`` records them, holding its photos."""
    shards = meta.get("shards")
    if not (isinstance(shards, dict) and set(shards) == set(SPLITS)):
        raise ValueError(
            f"expected the shards of each split ({', '.join(SPLITS)}) in {path}, found "
            f"{brief(shards)}"
        )
    for split, records in shards.items():
        if not (isinstance(records, list) and records):
            raise ValueError(f"expected a list of the {split} split's shards in {path}, found "
                             f"{brief(records)}")  # fmt: skip
        for index, record in enumerate(records):
            images, labels = shard_files(split, index)
            if not (
                isinstance(record, dict)
                and set(record) == set(SHARD_FIELDS)
                and (record["images"], record["labels"]) == (images, labels)
                and type(record["count"]) is int
                and record["count"] >= 0
                and _is_sha256(record["images_sha256"])
                and _is_sha256(record["labels_sha256"])
            ):
                raise ValueError(
                    f"expected shard {index} of the {split} split in {path} as images "
                    f"{images}, labels {labels}, a count and both files' sha256, found "
                    f"{brief(record)}"
                )
        held, counted = sum(r["count"] for r in records), sum(meta["counts"][split].values())
        if held != counted:
            raise ValueError(
                f"expected the {split} split's shards in {path} to hold its {counted} photos "
                f"(its counts), found {held}"
            )


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


def open_split(directory: Path, split: str, verify: bool = True) -> MappedSplit:
    """Map one split's shards, checking they fit the data contract and, with ``verify``,
    that each file's sha256 is the one ``meta.json`` records (a read of every byte).

    Raises:
        ValueError: a shard changed since preprocess wrote it, an array of the wrong type,
            or a shape other than ``meta.json`` says, an empty split, a label that is not
            the index of a class, or a split without a class.
    """
    directory = Path(directory)
    meta = read_meta(directory)
    side, channels = meta["image_size"], meta["channels"]
    shards, labels = [], []
    for record in meta["shards"][split]:
        images_path, labels_path = directory / record["images"], directory / record["labels"]
        count = record["count"]
        _check_size(images_path, count * channels * side * side)
        _check_size(labels_path, count * 8)
        if verify:
            _check_digest(images_path, record["images_sha256"])
            _check_digest(labels_path, record["labels_sha256"])
        images = _map_array(images_path)
        if images.dtype != np.uint8 or images.shape != (record["count"], channels, side, side):
            raise ValueError(
                f"expected uint8 {record['count']}×{channels}×{side}×{side} in {images_path} "
                f"(as {META} says), found {images.dtype} with shape {images.shape}"
            )
        shard_labels = np.array(_map_array(labels_path))
        if shard_labels.dtype != np.int64 or shard_labels.shape != (len(images),):
            raise ValueError(
                f"expected {len(images)} int64 labels in {labels_path.name}, found "
                f"{shard_labels.dtype} with shape {shard_labels.shape}"
            )
        shards.append(images)
        labels.append(shard_labels)
    mapped = MappedSplit(shards, np.concatenate(labels))
    _check_labels(mapped.labels, meta["classes"], split, directory)
    return mapped


HEADER_ROOM = 4096  # a .npy header's bytes at the most, for the shapes meta.json allows


def _check_size(path: Path, data_bytes: int) -> None:
    """Refuse a shard file larger than its header and its ``data_bytes`` take, before any
    byte of it is read (a sparse file of terabytes is not hashed)."""
    if not path.is_file():
        raise FileNotFoundError(f"expected {path.name} in {path.parent}, found none")
    size = path.stat().st_size
    if size > data_bytes + HEADER_ROOM:
        raise ValueError(
            f"expected {path} to hold the {data_bytes} bytes {META} counts and a header, "
            f"found {size} bytes"
        )


def _check_digest(path: Path, expected: str) -> None:
    if not path.is_file():
        raise FileNotFoundError(f"expected {path.name} in {path.parent}, found none")
    found = file_sha256(path)
    if found != expected:
        raise ValueError(
            f"expected {path} with the sha256 {META} records ({expected[:16]}…), found "
            f"{found[:16]}…: it changed since the preprocess step wrote it"
        )


def _check_labels(labels: np.ndarray, classes: list[str], split: str, directory: Path) -> None:
    if len(labels) == 0:
        raise ValueError(f"expected images in the {split} split of {directory}, found none")
    wrong = np.flatnonzero((labels < 0) | (labels >= len(classes)))
    if len(wrong):
        raise ValueError(
            f"expected labels from 0 to {len(classes) - 1} (the classes in {META}) in "
            f"{split}_labels_*.npy, found {labels[wrong[0]]} at index {wrong[0]} "
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


def load_split(directory: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """One split's images and labels, read whole into memory (``open_split``'s checks)."""
    mapped = open_split(directory, split)
    return mapped.images(), mapped.labels


def photos_sha256(photos: Iterable[tuple[str, int]]) -> str:
    """Which photos a split holds, with their labels, whatever their size or channels: the
    sha256 of its files' sha256s and labels (``photos``: pairs of them), sorted."""
    lines = sorted(f"{digest} {label}" for digest, label in photos)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def shards_digest(meta: dict[str, Any], split: str) -> str:
    """The sha256 of a split's shards' recorded sha256s, in order: which bytes it holds,
    no photo read (``open_split`` checks the files against them)."""
    listed = "".join(r["images_sha256"] + r["labels_sha256"] for r in meta["shards"][split])
    return hashlib.sha256(listed.encode()).hexdigest()


def photo_shape(meta: dict[str, Any]) -> tuple[int, int, int]:
    """One photo's C×H×W in the arrays ``meta`` describes."""
    return meta["channels"], meta["image_size"], meta["image_size"]


def split_file_sha256(directory: Path, split: str) -> str:
    """The sha256 of a split (which photos, at which size, with which labels), every byte
    counted: its dtypes and shapes, its images' bytes, then its labels', read from the
    shards a block at a time, never held whole. What the training run records of the test
    split, and what evaluate checks it scored."""
    directory = Path(directory)
    mapped = open_split(directory, split, verify=False)
    shape = (len(mapped), *mapped.image_shape)
    digest = hashlib.sha256(f"uint8{shape}int64{mapped.labels.shape}".encode())
    for record in read_meta(directory)["shards"][split]:
        for block in data_blocks(directory / record["images"]):
            digest.update(block)
    digest.update(mapped.labels.view(np.uint8).data)
    return digest.hexdigest()


def _map_array(path: Path) -> np.ndarray:
    """Map a plain ``.npy`` array, refusing pickles and files shorter than their header."""
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
    return mapped
