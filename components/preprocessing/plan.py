"""What preprocess decodes and where each photo goes, made once before any decoding.

The plan lists the files to decode (one of each set of identical files, found by
hashing every file), their classes and digests, and the split: each split's files in
order, cut into shards. A slice of the shards (``slices``) can then be decoded by a pod
of its own, and the slices joined (``components.preprocessing.build``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from components.core import schema
from components.core.memory import memory_limit
from components.data.arrays import SPLITS
from components.data.layout import LabelledFiles, find_labelled_files
from components.data.test_share import choose_test_photos
from components.preprocessing.config import PreprocessConfig
from components.preprocessing.decoder import Decoder

log = logging.getLogger(__name__)
PLAN = "plan.json"
SMALL_CLASS_SHARE = 0.2  # a class with fewer photos than this share of the largest's


@dataclass
class Plan:
    """The files to decode, by name under the input folder, in listing order, with their
    labels and sha256s; what was left out unread; and each split's files, by position in
    ``files``, in the split's order."""

    classes: list[str]
    layout: str
    folders: list[str]  # each class's folder under the input (the layout's)
    files: list[str]
    labels: list[int]
    digests: list[str]
    splits: dict[str, list[int]]
    per_shard: int  # photos a shard holds
    config: dict[str, Any]  # the recipe's settings (schema.params): what a slice decodes at
    slices: int = 1  # pods the shards are spread over: shard n goes to slice n % slices
    copies: dict[str, list[str]] = field(default_factory=dict)  # a digest's dropped copies
    skipped: list[dict[str, Any]] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    duplicates_removed: int = 0

    def shards(self, split: str) -> list[list[int]]:
        """The split's files cut into shards, in order (one empty shard for none)."""
        rows = self.splits[split]
        return [rows[i : i + self.per_shard] for i in range(0, len(rows), self.per_shard)] or [[]]

    def file(self, input_dir: Path, name: str) -> Path:
        """A planned file under ``input_dir``.

        Raises:
            ValueError: the name leads outside ``input_dir`` (a plan no preprocess made).
        """
        parts = PurePosixPath(name).parts
        if not parts or name.startswith("/") or ".." in parts:
            raise ValueError(f"expected files under {input_dir} in the plan, found {name!r:.200}")
        return input_dir / name


def shard_photos(cfg: PreprocessConfig) -> int:
    """How many photos a shard holds: as many as ``cfg.shard_mb`` takes, one at the least."""
    return max(1, cfg.shard_mb * 2**20 // (cfg.channels * cfg.image_size**2))


def make_plan(cfg: PreprocessConfig, decoder: Decoder, slices: int = 1) -> Plan:
    """Find the photos under ``cfg.input``, hash each (no decoding) to keep one of each
    set of identical files, and split them; the shards spread over ``slices`` pods.

    Raises:
        MemoryError: a shard would not fit in memory.
        OSError: the arrays would not fit on the output's disk.
        ValueError: a class too small to give each split one photo.
    """
    input_dir = Path(cfg.input)
    found = find_labelled_files(input_dir)
    log.info(
        "found %d image files of %d classes (%s) under %s",
        len(found.files), len(found.classes), found.layout, input_dir,
    )  # fmt: skip
    if found.ignored:
        log.info("left out %d files that are not photos of a class", len(found.ignored))
    per_shard = shard_photos(cfg)
    check_memory(min(per_shard, len(found.files)), cfg)
    _check_disk(len(found.files), cfg, Path(cfg.output))
    plan = _surveyed(found, decoder, per_shard, slices)
    plan.config = schema.params(cfg)
    labels = np.array(plan.labels, np.int64)
    test = np.array(choose_test_photos(plan.digests, plan.labels, cfg.test_fraction), bool)
    _check_class_sizes(labels, test, found.classes, cfg, input_dir, len(plan.skipped))
    split = split_indices(labels, test, cfg.val_fraction, cfg.split_seed)
    plan.splits = {name: split[name].tolist() for name in SPLITS}
    return plan


def _surveyed(found: LabelledFiles, decoder: Decoder, per_shard: int, slices: int) -> Plan:
    """Hash every file and keep the first of each set of identical files; identical
    files under more than one class are all left out, and reported."""
    paths = [path for path, _ in found.files]
    labels = [label for _, label in found.files]
    skipped: list[dict[str, Any]] = []
    first_seen: dict[str, list[int]] = {}
    for i, result in enumerate(decoder.digests(paths)):
        if result.sha256 is None:
            skipped.append({"file": found.name(paths[i]), "reason": result.reason})
        else:
            first_seen.setdefault(result.sha256, []).append(i)
    keep, duplicates, copies = [], 0, {}
    for digest, seen in first_seen.items():
        if len({labels[i] for i in seen}) > 1:
            names = ", ".join(found.name(paths[i]) for i in seen)
            reason = f"identical files under more than one class: {names}"
            skipped += [{"file": found.name(paths[i]), "reason": reason} for i in seen]
            continue
        keep.append(seen[0])
        duplicates += len(seen) - 1
        if len(seen) > 1:
            copies[digest] = [found.name(paths[i]) for i in seen[1:]]
    keep.sort()
    digest_of = {seen[0]: digest for digest, seen in first_seen.items()}
    return Plan(
        classes=list(found.classes),
        layout=found.layout,
        folders=list(found.folders),
        files=[found.name(paths[i]) for i in keep],
        labels=[labels[i] for i in keep],
        digests=[digest_of[i] for i in keep],
        splits={},
        per_shard=per_shard,
        config={},
        slices=slices,
        copies=copies,
        skipped=skipped,
        ignored=[found.name(p) for p in found.ignored],
        duplicates_removed=duplicates,
    )


def write_plan(plan: Plan, folder: Path) -> None:
    (folder / PLAN).write_text(json.dumps(dataclasses.asdict(plan)))


def read_plan(folder: Path) -> Plan:
    """The plan a plan step wrote into ``folder``.

    Raises:
        ValueError: it is not one.
    """
    try:
        fields = json.loads((folder / PLAN).read_text())
        plan = Plan(**fields)
    except (OSError, ValueError, TypeError) as err:
        raise ValueError(f"expected {PLAN} of the preprocess plan step in {folder}: {err}") from err
    if set(plan.splits) != set(SPLITS) or plan.per_shard < 1 or plan.slices < 1:
        raise ValueError(f"expected a split, a shard size and slices in {folder / PLAN}")
    return plan


def planned_config(plan: Plan, input_dir: str, output_dir: str) -> PreprocessConfig:
    """The preprocess settings a plan was made with, reading ``input_dir`` into
    ``output_dir``: what a slice or the join runs with.

    Raises:
        ValueError: the plan's settings are outside the schema.
    """
    return PreprocessConfig(input=input_dir, output=output_dir, **plan.config)


def check_memory(count: int, cfg: PreprocessConfig) -> None:
    """Refuse, before decoding, a shard of ``count`` photos that would not fit in the
    memory available: the machine's, or the container's limit where lower."""
    needed = count * cfg.channels * cfg.image_size**2  # one shard's photos, held once
    limit = memory_limit()
    available = min(available_memory() or limit, limit)
    if needed > 0.8 * available:
        raise MemoryError(
            f"expected a shard that fits in memory: {count} images at {cfg.channels}×"
            f"{cfg.image_size}×{cfg.image_size} need about {needed / 2**30:.1f} GiB, "
            f"{available / 2**30:.1f} GiB is available; lower --shard-mb or --image-size"
        )


def _check_disk(count: int, cfg: PreprocessConfig, output_dir: Path) -> None:
    """Refuse, before decoding, arrays that would not fit on the output's disk."""
    needed = count * cfg.channels * cfg.image_size**2
    existing = next(p for p in (output_dir, *output_dir.absolute().parents) if p.exists())
    free = shutil.disk_usage(existing).free
    if needed > free:
        raise OSError(
            f"expected room for the arrays on the disk of {output_dir}: {count} images at "
            f"{cfg.channels}×{cfg.image_size}×{cfg.image_size} need about "
            f"{needed / 2**30:.1f} GiB, {free / 2**30:.1f} GiB is free"
        )


def available_memory() -> int | None:
    """Bytes of memory available to this process (MemAvailable), or None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _check_class_sizes(
    labels: np.ndarray,
    test: np.ndarray,
    classes: tuple[str, ...],
    cfg: PreprocessConfig,
    input_dir: Path,
    skipped: int,
) -> None:
    """Refuse a class too small for each split to hold one of its photos, naming it; warn
    of a class much smaller than the largest (its figures rest on few photos)."""
    counts = np.bincount(labels, minlength=len(classes))
    tests = np.bincount(labels[test], minlength=len(classes))
    for name, count, tested in zip(classes, counts, tests, strict=True):
        if count - tested - val_size(int(count), cfg.val_fraction) < 1:
            raise ValueError(too_few(name, int(count), cfg, input_dir, skipped))
    for name in small_classes(classes, counts):
        log.warning(
            "class %r has %d photos, fewer than %d%% of the largest class's %d",
            name, counts[classes.index(name)], SMALL_CLASS_SHARE * 100, counts.max(),
        )  # fmt: skip


def too_few(name: str, count: int, cfg: PreprocessConfig, input_dir: Path, skipped: int) -> str:
    """The refusal of a class too small to give each split one photo that decodes."""
    return (
        f"expected enough photos of class {name!r} under {input_dir} that decode to "
        f"give train, val ({cfg.val_fraction:g}) and test ({cfg.test_fraction:g}) "
        f"one each, found {count} ({skipped} files skipped in all)"
    )


def small_classes(classes: tuple[str, ...], counts: np.ndarray) -> list[str]:
    """The classes with fewer photos than a fifth of the largest class's."""
    return [n for n, c in zip(classes, counts, strict=True) if c < SMALL_CLASS_SHARE * max(counts)]


def split_indices(
    labels: np.ndarray, test: np.ndarray, val_fraction: float, seed: int
) -> dict[str, np.ndarray]:
    """The split of ``range(len(labels))`` into train/val/test index arrays: test the
    photos in the test share (``test``, from their sha256s), val a seeded draw of each
    class's share from the rest, train the others; each split in a seeded order."""
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {split: [] for split in SPLITS}
    for label in np.unique(labels):
        rows = np.flatnonzero(labels == label)
        rest = rng.permutation(rows[~test[rows]])
        n_val = val_size(len(rows), val_fraction)
        parts["test"].append(rows[test[rows]])
        parts["val"].append(rest[:n_val])
        parts["train"].append(rest[n_val:])
    return {
        split: rng.permutation(np.concatenate(p)) if p else np.zeros(0, np.int64)
        for split, p in parts.items()
    }


def val_size(count: int, val_fraction: float) -> int:
    """How many of a class's ``count`` photos go to val: their share, and at least one
    where the share is not 0, so that val holds every class."""
    return max(round(count * val_fraction), int(val_fraction > 0))
