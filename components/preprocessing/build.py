"""The preprocess step's work: decode, de-duplicate and split photos into array shards.

In one process: make the plan (``plan``), decode its one slice (``slices``), join. On a
cluster the same three run as tasks of their own, the slices in parallel pods
(``pipeline``): ``join_slices`` puts their shards together.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from components.core import schema
from components.core.atomic import atomic_directory, check_replaceable, write_json
from components.core.names import DOWNLOAD_RECORD, TEST_PHOTOS_DIR
from components.data.arrays import META, SPLITS, photos_sha256
from components.data.kept_photos import LEFT_OUT_DIR, LEFT_OUT_NAMES
from components.data.shards import shard_files
from components.data.test_share import in_test_share
from components.preprocessing.config import PreprocessConfig
from components.preprocessing.decoder import Decoder
from components.preprocessing.plan import Plan, make_plan, shard_photos, small_classes, too_few
from components.preprocessing.slices import WrittenShard, WrittenSlice, decode_slice, read_slice

log = logging.getLogger(__name__)


def build_arrays(cfg: PreprocessConfig) -> dict[str, Any]:
    """Decode every image under ``cfg.input`` and write the split shards to ``cfg.output``.

    The split is drawn over the files to decode (one of each set of identical files),
    then each split is decoded a shard at a time and written: memory holds one shard's
    photos, whatever the photo count. ``cfg.output`` is replaced whole, or left untouched
    if anything fails.

    Args:
        cfg: the input (the download step's output, a folder per class), the
            output, the image shape, the split, the shard size and the worker count.

    Returns:
        The ``meta.json`` contents.
    """
    input_dir, output_dir = Path(cfg.input), Path(cfg.output)
    check_replaceable(output_dir, "preprocess")  # at once, not after the decoding
    with Decoder(cfg, shard_photos(cfg)) as decoder:  # memory taken as photos are decoded
        plan = make_plan(cfg, decoder)
        with atomic_directory(output_dir, "preprocess") as staging:
            written = decode_slice(plan, 0, input_dir, staging, decoder)
            return join_slices(plan, [written], cfg, staging)


def join_folders(plan: Plan, folders: list[Path], cfg: PreprocessConfig) -> dict[str, Any]:
    """Join the slices that slice steps wrote into ``folders`` into ``cfg.output``: each
    shard a record names moved in by a hard link where the file system allows, else a
    copy; ``cfg.output`` replaced whole, or left untouched if anything fails.

    Raises:
        ValueError: a shard missing, or written by two slices.
    """
    output_dir = Path(cfg.output)
    check_replaceable(output_dir, "preprocess")
    slices = [read_slice(folder) for folder in folders]
    for split in SPLITS:
        numbers = sorted(s.number for held in slices for s in held.shards.get(split, []))
        if numbers != list(range(len(plan.shards(split)))):
            raise ValueError(
                f"expected the {split} split's shards 0 to {len(plan.shards(split)) - 1} once "
                f"each from the {len(folders)} slices, found {numbers[:20]}"
            )
    with atomic_directory(output_dir, "preprocess") as staging:
        for folder, held in zip(folders, slices, strict=True):
            for split in SPLITS:
                for shard in held.shards[split]:
                    images, labels = shard_files(split, shard.number)  # never names it gives
                    for name in (images, labels):
                        _link_or_copy(folder / name, staging / name)
                    shard.record.update(images=images, labels=labels)
        return join_slices(plan, slices, cfg, staging)


def _link_or_copy(source: Path, target: Path) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system, or links refused
        shutil.copyfile(source, target)


def join_slices(
    plan: Plan, slices: list[WrittenSlice], cfg: PreprocessConfig, staging: Path
) -> dict[str, Any]:
    """Put the slices' shards (already in ``staging``) together: check every split holds
    every class, keep the test photos, write ``meta.json``; its contents."""
    input_dir = Path(cfg.input)
    shards = {
        split: sorted((s for held in slices for s in held.shards[split]), key=lambda s: s.number)
        for split in SPLITS
    }
    skipped = sorted(  # by name: the same whatever the slicing
        plan.skipped + [entry for held in slices for entry in held.skipped],
        key=lambda entry: entry["file"],
    )
    labels = {split: [label for s in shards[split] for label in s.labels] for split in SPLITS}
    kept = np.bincount(
        np.array([x for split in SPLITS for x in labels[split]], np.int64),
        minlength=len(plan.classes),
    )
    for split in SPLITS:
        counts = np.bincount(np.array(labels[split], np.int64), minlength=len(plan.classes))
        if labels[split] and counts.min() == 0:
            name = plan.classes[int(np.argmin(counts))]
            count = int(kept[plan.classes.index(name)])
            raise ValueError(too_few(name, count, cfg, input_dir, len(skipped)))
    mean, std = channel_stats(shards["train"], cfg.image_size)
    if min(std) == 0:  # every training image one colour: nothing to learn, nothing to scale
        raise ValueError(
            f"expected photos that vary, found every training image under {input_dir} "
            f"one flat colour (std {std}); these are not photos"
        )
    test_files = [plan.file(input_dir, name) for s in shards["test"] for name in s.files]
    _keep_photos(staging / TEST_PHOTOS_DIR, test_files)
    left_out = _test_share_left_out(plan, skipped, cfg.test_fraction)
    _keep_left_out(staging / LEFT_OUT_DIR, [(n, plan.file(input_dir, n)) for n in left_out])

    def by_class(values: list[int] | np.ndarray) -> dict[str, int]:
        counts = np.bincount(np.array(values, np.int64), minlength=len(plan.classes))
        return {name: int(n) for name, n in zip(plan.classes, counts, strict=True)}

    duplicates = plan.duplicates_removed - sum(held.copies_skipped for held in slices)
    meta = {
        "classes": plan.classes,
        "class_folders": plan.folders,
        "image_size": cfg.image_size,
        "channels": cfg.channels,
        "layout": plan.layout,
        "counts": {split: by_class(labels[split]) for split in SPLITS},
        "kept": {name: int(n) for name, n in zip(plan.classes, kept, strict=True)},
        "small_classes": small_classes(tuple(plan.classes), kept),
        "skipped": skipped,
        "ignored": plan.ignored,
        "duplicates_removed": duplicates,
        "photos_sha256": {
            split: photos_sha256(
                (digest, label)
                for s in shards[split]
                for digest, label in zip(s.digests, s.labels, strict=True)
            )
            for split in SPLITS
        },
        "shards": {split: [s.record for s in shards[split]] for split in SPLITS},
        "mean": mean,
        "std": std,
        "config": schema.params(cfg),
        "source": _download_record(input_dir),
    }
    write_json(staging / META, meta)
    log.info(
        "kept %s, skipped %d broken files, removed %d duplicates -> %s",
        meta["kept"], len(skipped), duplicates, cfg.output,
    )  # fmt: skip
    return meta


def channel_stats(train: list[WrittenShard], side: int) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of the train shards' pixels, scaled to [0, 1], from their
    exact sums."""
    photos = sum(len(shard.labels) for shard in train)
    if not photos:
        raise ValueError("expected at least one training image, found none")
    sums = np.sum([np.array(s.sums, np.uint64) for s in train if s.labels], axis=0)
    squares = np.sum([np.array(s.squares, np.uint64) for s in train if s.labels], axis=0)
    count = photos * side * side
    mean = sums / count / 255.0
    std = np.sqrt(np.maximum(squares / count / 255.0**2 - mean**2, 0.0))
    return mean.round(6).tolist(), std.round(6).tolist()


def _keep_photos(folder: Path, files: list[Path]) -> None:
    """A split's photo files, in its order (``00000``, ``00001``, …): the gate scores the
    alias's holder on the test split's, decoded at that model's own size.

    Each is a hard link to its input's file (the file an input that is a symbolic link
    names, never the link) where both are on one file system and the system allows it
    (the same bytes, written once: a tenth of the copies' time), else a copy. Nothing
    writes to a kept photo, and a photo changed since preprocess no longer matches the
    digest ``meta.json`` records, which evaluate checks."""
    folder.mkdir()
    for position, file in enumerate(files):
        _link_or_copy(file.resolve(), folder / f"{position:05d}")


def _keep_left_out(folder: Path, files: list[tuple[str, Path]]) -> None:
    """The test share's files that did not decode, kept as ``_keep_photos`` keeps photos,
    with their names in the input (``names.json``): evaluate checks each."""
    folder.mkdir()
    for position, (_, file) in enumerate(files):
        _link_or_copy(file.resolve(), folder / f"{position:05d}")
    write_json(folder / LEFT_OUT_NAMES, [name for name, _ in files])


def _test_share_left_out(plan: Plan, skipped: list[dict[str, Any]], fraction: float) -> list[str]:
    """The skipped files in the test share (the photos evaluate expects and finds
    missing), by name: it checks that each does not decode."""
    digests = dict(zip(plan.files, plan.digests, strict=True))
    digests |= {name: digest for digest, names in plan.copies.items() for name in names}
    names = [entry["file"] for entry in skipped]
    return [name for name in names if name in digests and in_test_share(digests[name], fraction)]


def _download_record(input_dir: Path) -> dict[str, Any] | None:
    """Where the photos came from, as the download step recorded it (source URI, its
    sha256 and size), or None for a folder that no download step wrote."""
    try:
        record = json.loads((input_dir / DOWNLOAD_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    return {key: record.get(key) for key in ("source", "sha256", "bytes", "listing", "listing_run")}
