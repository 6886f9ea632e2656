"""One slice of the plan's shards decoded and written: the work of one preprocess pod.

Slice ``k`` of ``n`` decodes shard numbers ``k``, ``k + n``, … of each split and writes
them under their own names, so that the slices' files put together are the arrays one
process would write. Test and val go first. A val photo that does not decode is replaced
by a photo of its class from this slice's train shards, so that val keeps its share of
every class; train's then leave out what was taken. A test photo that does not decode is
left out: the test split holds the source's test photos and no other.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from components.data import images
from components.data.shards import write_shard
from components.preprocessing.decoder import Decoder
from components.preprocessing.plan import Plan

log = logging.getLogger(__name__)
SLICE = "slice.json"
WRITE_ORDER = ("test", "val", "train")


@dataclass
class WrittenShard:
    """One shard as written: its record for ``meta.json``, its photos' labels, digests and
    file names in order, and the exact sums of its pixel values and their squares."""

    number: int
    record: dict[str, Any]
    labels: list[int]
    digests: list[str]
    files: list[str]
    sums: list[int]
    squares: list[int]


@dataclass
class WrittenSlice:
    """A slice's shards by split, and the files it skipped because they did not decode."""

    shards: dict[str, list[WrittenShard]] = field(default_factory=dict)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    copies_skipped: int = 0  # dropped copies of files that did not decode: not duplicates


def decode_slice(
    plan: Plan, index: int, input_dir: Path, output_dir: Path, decoder: Decoder
) -> WrittenSlice:
    """Decode slice ``index`` of ``plan`` from ``input_dir`` and write its shards into
    ``output_dir``."""
    mine = {
        split: [(n, rows) for n, rows in enumerate(plan.shards(split)) if n % plan.slices == index]
        for split in WRITE_ORDER
    }
    spares = _Spares([row for _, rows in mine["train"] for row in rows], plan.labels)
    written = WrittenSlice()
    for split in WRITE_ORDER:
        written.shards[split] = []
        for number, rows in mine[split]:
            if split == "train":
                rows = [row for row in rows if row not in spares.taken]
            shard = _write(plan, split, number, rows, input_dir, output_dir, decoder, written,
                           spares if split == "val" else None)  # fmt: skip
            written.shards[split].append(shard)
    return written


class _Spares:
    """Train's files by class, from the end of their order: what replaces a val photo
    that does not decode."""

    def __init__(self, train: list[int], labels: list[int]):
        self.left: dict[int, list[int]] = {}
        for row in train:
            self.left.setdefault(labels[row], []).append(row)
        self.taken: set[int] = set()

    def take(self, label: int) -> int | None:
        """The next spare of class ``label``, or None when none is left."""
        left = self.left.get(label, [])
        if not left:
            return None
        self.taken.add(left[-1])
        return left.pop()


def _write(
    plan: Plan,
    split: str,
    number: int,
    rows: list[int],
    input_dir: Path,
    output_dir: Path,
    decoder: Decoder,
    written: WrittenSlice,
    spares: _Spares | None,
) -> WrittenShard:
    """Decode one shard's files and write those that decode (and spares for those that
    do not, where given); the others recorded in ``written.skipped``."""
    kept: list[int] = []
    lost: list[int] = []
    files = [plan.file(input_dir, plan.files[row]) for row in rows]
    for position, result in enumerate(decoder.decode(files)):
        if not _decoded(result, rows[position], plan, written):
            lost.append(rows[position])
            continue
        if result.pixels is not None:  # else a forked worker wrote them in place
            decoder.buffer[position] = result.pixels
        if len(kept) != position:  # the kept photos to the front, in place
            decoder.buffer[len(kept)] = decoder.buffer[position]
        kept.append(rows[position])
    if spares is not None:
        kept += _replacements(lost, spares, plan, input_dir, decoder, written, len(kept))
    pixels = decoder.buffer[: len(kept)]
    labels = np.array([plan.labels[row] for row in kept], np.int64)
    record = write_shard(output_dir, split, number, pixels, labels)
    log.info(
        "wrote %s shard %d of %d: %d photos (%d files did not decode)",
        split, number + 1, len(plan.shards(split)), len(kept), len(lost),
    )  # fmt: skip
    sums, squares = channel_sums(pixels)
    return WrittenShard(
        number,
        record,
        labels.tolist(),
        [plan.digests[row] for row in kept],
        [plan.files[row] for row in kept],
        sums.tolist(),
        squares.tolist(),
    )


def _replacements(
    lost: list[int],
    spares: _Spares,
    plan: Plan,
    input_dir: Path,
    decoder: Decoder,
    written: WrittenSlice,
    start: int,
) -> list[int]:
    """A spare of each ``lost`` file's class that decodes, where one is left, decoded here
    into ``decoder.buffer`` from row ``start`` on."""
    taken: list[int] = []
    for row in lost:
        while (spare := spares.take(plan.labels[row])) is not None:
            result = decoder.decode_here(plan.file(input_dir, plan.files[spare]))
            if _decoded(result, spare, plan, written) and result.pixels is not None:
                decoder.buffer[start + len(taken)] = result.pixels
                taken.append(spare)
                break
    return taken


def _decoded(result: images.Decoded, row: int, plan: Plan, written: WrittenSlice) -> bool:
    """Whether planned file ``row`` decoded as the file it was when hashed; if not, it and
    its dropped copies are recorded in ``written.skipped`` with the reason."""
    reason = result.reason
    if reason is None and result.sha256 != plan.digests[row]:
        reason = "the file changed while preprocess read it"
    if reason is None:
        return True
    copies = plan.copies.get(plan.digests[row], [])
    written.skipped += [{"file": name, "reason": reason} for name in (plan.files[row], *copies)]
    written.copies_skipped += len(copies)
    return False


def channel_sums(pixels: np.ndarray, chunk_bytes: int = 2**20) -> tuple[np.ndarray, np.ndarray]:
    """Exact integer sums of uint8 N×C×H×W pixel values and of their squares, by channel:
    a block of about ``chunk_bytes`` at a time (one that stays in the cache), without a
    float copy of the pixels."""
    chunk = max(1, chunk_bytes // max(1, pixels[0].nbytes if len(pixels) else 1))
    sums = np.zeros(pixels.shape[1], np.uint64)
    squares = np.zeros(pixels.shape[1], np.uint64)
    for start in range(0, len(pixels), chunk):
        block = pixels[start : start + chunk]
        for channel in range(pixels.shape[1]):
            values = block[:, channel]
            sums[channel] += values.sum(dtype=np.uint64)
            wide = values.astype(np.uint16)
            wide *= wide  # 255² fits in 16 bits
            squares[channel] += wide.sum(dtype=np.uint64)
    return sums, squares


def write_slice(written: WrittenSlice, folder: Path) -> None:
    (folder / SLICE).write_text(
        json.dumps(
            {
                "shards": {
                    split: [vars(shard) for shard in held] for split, held in written.shards.items()
                },
                "skipped": written.skipped,
                "copies_skipped": written.copies_skipped,
            }
        )
    )


def read_slice(folder: Path) -> WrittenSlice:
    """The record a slice step wrote into ``folder``.

    Raises:
        ValueError: it is not one.
    """
    try:
        fields = json.loads((folder / SLICE).read_text())
        shards = {
            split: [WrittenShard(**shard) for shard in held]
            for split, held in fields["shards"].items()
        }
        return WrittenSlice(shards, list(fields["skipped"]), int(fields["copies_skipped"]))
    except (OSError, ValueError, TypeError, KeyError) as err:
        raise ValueError(f"expected {SLICE} of a preprocess slice step in {folder}: {err}") from err
