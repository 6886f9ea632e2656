"""Near-duplicate photos across the preprocess step's train, val and test splits.

Each photo the preprocess step keeps (exact copies already dropped) gets a 64-bit
perceptual hash: the signs of the lowest 8×8 DCT frequencies of its 32×32 grey pixels
against their median (the common pHash). Pairs within ``--radius`` bits are the same
photo resized, recompressed or lightly edited. The split is the one preprocess makes with
its default fractions and seed, so a pair across splits is a photo the test (or val)
split shares with training.

    python -m benchmarks.near_duplicates --archive ../shared/data/petimages-23k.zip
"""

from __future__ import annotations

import argparse
import collections
import tempfile
from pathlib import Path

import numpy as np

from benchmarks.common import machine
from components.data.arrays import SPLITS, load_split, read_meta
from components.downloading.fetch import fetch
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig

SIDE = 32  # pixels the hash reads
LOW = 8  # the lowest LOW×LOW frequencies make the 64 bits
BLOCK = 512  # photos compared against all at once


def dct_matrix(n: int) -> np.ndarray:
    """The orthonormal DCT-II matrix of size ``n``."""
    k, i = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    matrix = np.cos(np.pi * (2 * i + 1) * k / (2 * n)) * np.sqrt(2 / n)
    matrix[0] /= np.sqrt(2)
    return matrix


def perceptual_hashes(pixels: np.ndarray) -> np.ndarray:
    """One uint64 hash per N×1×SIDE×SIDE grey image."""
    dct = dct_matrix(SIDE)
    grey = pixels[:, 0].astype(np.float64)
    low = (dct @ grey @ dct.T)[:, :LOW, :LOW].reshape(len(pixels), -1)
    bits = low > np.median(low[:, 1:], axis=1, keepdims=True)  # DC left out of the median
    return np.packbits(bits, axis=1).view(">u8")[:, 0].astype(np.uint64)


def close_pairs(hashes: np.ndarray, radius: int) -> list[tuple[int, int, int]]:
    """Every pair (i, j, distance), i < j, whose hashes differ in at most ``radius`` bits."""
    ones = np.array([bin(value).count("1") for value in range(1 << 16)], np.int32)
    pairs = []
    for start in range(0, len(hashes), BLOCK):
        xor = hashes[start : start + BLOCK, None] ^ hashes[None, :]
        distance = sum(ones[(xor >> shift) & 0xFFFF] for shift in (0, 16, 32, 48))
        rows, columns = np.nonzero(distance <= radius)
        for row, column in zip(rows, columns, strict=True):
            if start + row < column:
                pairs.append((int(start + row), int(column), int(distance[row, column])))
    return pairs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, required=True)
    parser.add_argument("--radius", type=int, default=4, help="bits two hashes may differ in")
    parser.add_argument("--examples", type=int, default=12, help="pairs across splits shown")
    args = parser.parse_args()
    print(f"machine: {machine()}")
    with tempfile.TemporaryDirectory(prefix="near-duplicates-") as scratch:
        photos, arrays = Path(scratch) / "photos", Path(scratch) / "arrays"
        fetch(str(args.archive.resolve()), photos)
        build_arrays(
            PreprocessConfig(input=str(photos), output=str(arrays), image_size=SIDE, channels=1)
        )
        held = {split: load_split(arrays, split) for split in SPLITS}
        dropped = read_meta(arrays)["duplicates_removed"]
    pixels = np.concatenate([held[split][0] for split in SPLITS])
    labels = np.concatenate([held[split][1] for split in SPLITS])
    split_of = np.concatenate([np.full(len(held[split][1]), split, object) for split in SPLITS])
    splits = {split: np.flatnonzero(split_of == split) for split in SPLITS}
    pairs = close_pairs(perceptual_hashes(pixels), args.radius)
    across = [(i, j, d) for i, j, d in pairs if split_of[i] != split_of[j]]
    kinds = collections.Counter("-".join(sorted((split_of[i], split_of[j]))) for i, j, _ in across)
    print(f"photos kept: {len(labels)} ({dropped} exact copies dropped)")
    print(f"pairs within {args.radius} bits: {len(pairs)}")
    mixed = sum(labels[i] != labels[j] for i, j, _ in pairs)
    print(f"  of different labels: {mixed}")
    print(f"  across splits: {len(across)} {dict(sorted(kinds.items()))}")
    for split in ("val", "test"):
        shared = {k for i, j, _ in across for k in (i, j) if split_of[k] == split}
        print(f"  {split} photos with a near-duplicate in another split: {len(shared)} of "
              f"{len(splits[split])}")  # fmt: skip
    print("distance, labels, splits of the first pairs across splits:")
    for i, j, d in across[: args.examples]:
        print(f"  {d}  {labels[i]}/{labels[j]}  {split_of[i]}/{split_of[j]}")


if __name__ == "__main__":
    main()
