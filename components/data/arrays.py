"""Read and write the preprocessed arrays and ``meta.json``: the data contract between steps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

SPLITS = ("train", "val", "test")
META = "meta.json"


def save_split(directory: Path, split: str, images: np.ndarray, labels: np.ndarray) -> None:
    """Save ``{split}_images.npy`` (uint8 N×C×H×W) and ``{split}_labels.npy`` (int64 N)."""
    np.save(
        directory / f"{split}_images.npy",
        np.ascontiguousarray(images, np.uint8),
        allow_pickle=False,
    )
    np.save(directory / f"{split}_labels.npy", np.asarray(labels, np.int64), allow_pickle=False)


def read_meta(directory: Path) -> dict:
    path = Path(directory) / META
    if not path.is_file():
        raise FileNotFoundError(
            f"expected {META} from the preprocess step in {directory}, found none"
        )
    return json.loads(path.read_text())


def load_split(directory: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """Load one split's images and labels, checking they fit the data contract.

    Raises:
        ValueError: an array of the wrong type or shape, an empty split, or a label
            other than 0 (cat) and 1 (dog).
    """
    directory = Path(directory)
    images = _load_array(directory / f"{split}_images.npy")
    labels = _load_array(directory / f"{split}_labels.npy")
    if images.dtype != np.uint8 or images.ndim != 4:
        raise ValueError(
            f"expected uint8 N×C×H×W in {split}_images.npy, found {images.dtype} "
            f"with shape {images.shape}"
        )
    if labels.dtype != np.int64 or labels.shape != (len(images),):
        raise ValueError(
            f"expected {len(images)} int64 labels in {split}_labels.npy, found "
            f"{labels.dtype} with shape {labels.shape}"
        )
    if len(labels) == 0:
        raise ValueError(f"expected images in the {split} split of {directory}, found none")
    wrong = np.flatnonzero((labels != 0) & (labels != 1))
    if len(wrong):
        raise ValueError(
            f"expected labels 0 (cat) or 1 (dog) in {split}_labels.npy, found "
            f"{labels[wrong[0]]} at index {wrong[0]} ({len(wrong)} such labels)"
        )
    return images, labels


def _load_array(path: Path) -> np.ndarray:
    if not path.is_file():
        raise FileNotFoundError(f"expected {path.name} in {path.parent}, found none")
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as err:
        if "pickle" not in str(err):
            raise ValueError(f"cannot read {path} as a .npy array: {err}") from err
        raise ValueError(
            f"refusing {path}: it holds pickled objects, and loading them could run code; "
            "expected a plain numeric array written by the preprocess step"
        ) from err
