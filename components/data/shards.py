"""A split on disk as shards: plain ``.npy`` files of bounded size, read memory-mapped.

Split ``train`` is ``train_images_00000.npy`` (uint8 n×C×H×W) and
``train_labels_00000.npy`` (int64 n), then ``…_00001.npy`` and so on; ``meta.json`` lists
each shard with its photo count and the sha256 of both files. A reader maps the shards and
gathers the rows a batch needs, so no step holds more of a split than it asks for.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

SHARD_FIELDS = ("images", "labels", "count", "images_sha256", "labels_sha256")
BLOCK = 8 * 2**20  # bytes written or hashed at a time


def shard_files(split: str, index: int) -> tuple[str, str]:
    """The file names of shard ``index`` of ``split``: its images, then its labels."""
    return f"{split}_images_{index:05d}.npy", f"{split}_labels_{index:05d}.npy"


def write_shard(
    directory: Path, split: str, index: int, images: np.ndarray, labels: np.ndarray
) -> dict[str, Any]:
    """Write shard ``index`` of ``split`` (``images`` uint8 n×C×H×W, ``labels`` int64 n),
    a block at a time and synced to disk, and return its ``meta.json`` record."""
    images_name, labels_name = shard_files(split, index)
    header = {"descr": "|u1", "fortran_order": False, "shape": images.shape}
    with _HashedFile(Path(directory) / images_name) as handle:
        np.lib.format.write_array_header_1_0(handle, header)
        rows = max(1, BLOCK // max(1, int(np.prod(images.shape[1:]))))
        for start in range(0, len(images), rows):
            handle.write(np.ascontiguousarray(images[start : start + rows], np.uint8).data)
    images_sha256 = handle.sha256
    with _HashedFile(Path(directory) / labels_name) as handle:
        np.save(handle, np.asarray(labels, np.int64), allow_pickle=False)
    return {
        "images": images_name,
        "labels": labels_name,
        "count": len(images),
        "images_sha256": images_sha256,
        "labels_sha256": handle.sha256,
    }


class _HashedFile:
    """A file opened for writing that hashes what is written, on disk when closed."""

    def __init__(self, path: Path):
        self.path, self.sha256 = path, ""
        self._digest = hashlib.sha256()

    def __enter__(self) -> _HashedFile:
        self._handle: BinaryIO = open(self.path, "wb")  # noqa: SIM115  # closed in __exit__
        return self

    def write(self, data: bytes | memoryview) -> int:
        self._digest.update(data)
        return self._handle.write(data)

    def __exit__(self, *failure: object) -> None:
        try:
            if failure[0] is None:
                self._handle.flush()
                os.fsync(self._handle.fileno())
        finally:
            self._handle.close()
        self.sha256 = self._digest.hexdigest()


def file_sha256(path: Path) -> str:
    """The sha256 of a file, read a block at a time."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


def data_blocks(path: Path) -> Iterator[bytes]:
    """The bytes of a ``.npy`` file's array after its header, a block at a time."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        if version == (1, 0):
            np.lib.format.read_array_header_1_0(handle)
        elif version == (2, 0):
            np.lib.format.read_array_header_2_0(handle)
        else:
            raise ValueError(
                f"expected a .npy file of format 1.0 or 2.0 in {path}, found {version}"
            )
        while block := handle.read(BLOCK):
            yield block


SHARD_NAME = re.compile(r"(train|val|test)_(images|labels)_(\d{5})\.npy")


@dataclass
class MappedSplit:
    """One split's shards, memory-mapped, and its labels in memory (8 bytes a photo).

    ``rows`` picks the split's photos this view holds, in order; all of them where None.
    """

    shards: list[np.ndarray]
    all_labels: np.ndarray
    rows: np.ndarray | None = None

    def __post_init__(self) -> None:
        self._starts = np.cumsum([0, *(len(shard) for shard in self.shards)])

    def __len__(self) -> int:
        return len(self.all_labels) if self.rows is None else len(self.rows)

    @property
    def image_shape(self) -> tuple[int, ...]:
        return tuple(self.shards[0].shape[1:])

    @property
    def labels(self) -> np.ndarray:
        return self.all_labels if self.rows is None else self.all_labels[self.rows]

    @property
    def nbytes(self) -> int:
        """The bytes of this view's images, read whole."""
        return len(self) * int(np.prod(self.image_shape))

    def subset(self, index: np.ndarray) -> MappedSplit:
        """The photos at ``index`` of this view, still on disk."""
        rows = np.asarray(index, np.int64) if self.rows is None else self.rows[index]
        return MappedSplit(self.shards, self.all_labels, rows)

    def images(self, index: np.ndarray | slice | None = None) -> np.ndarray:
        """The images at ``index`` of this view (all where None), gathered into memory."""
        wanted = np.arange(len(self))[index] if index is not None else np.arange(len(self))
        rows = wanted if self.rows is None else self.rows[wanted]
        out = np.empty((len(rows), *self.image_shape), np.uint8)
        shard_of = np.searchsorted(self._starts, rows, side="right") - 1
        for shard in np.unique(shard_of):
            here = np.flatnonzero(shard_of == shard)
            out[here] = self.shards[shard][rows[here] - self._starts[shard]]
        return out
