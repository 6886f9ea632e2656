"""The preprocess step's work: decode, de-duplicate and split photos into arrays."""

from __future__ import annotations

import functools
import json
import logging
import mmap
import multiprocessing
import os
import shutil
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from components.core import schema
from components.core.atomic import atomic_directory, check_replaceable, write_json
from components.core.cores import available_cores
from components.core.memory import memory_limit
from components.core.names import DOWNLOAD_RECORD, TEST_PHOTOS_DIR
from components.core.progress import progress as progress_bar
from components.data import images
from components.data.arrays import META, SPLITS, photos_sha256, save_split
from components.data.layout import LabelledFiles, find_labelled_files
from components.preprocessing.config import PreprocessConfig

log = logging.getLogger(__name__)


@dataclass
class DecodedImages:
    """The kept images in file order, and the files left out with reasons."""

    pixels: np.ndarray
    labels: np.ndarray
    digests: list[str]  # each kept photo's file sha256, in the same order
    files: list[Path]  # and its file
    skipped: list[dict[str, Any]] = field(default_factory=list)
    duplicates_removed: int = 0


def build_arrays(cfg: PreprocessConfig) -> dict[str, Any]:
    """Decode every image under ``cfg.input`` and write the split arrays to ``cfg.output``.

    ``cfg.output`` is replaced whole, or left untouched if anything fails.

    Args:
        cfg: the input (the download step's output, a folder per class), the
            output, the image shape, the split and the worker count.

    Returns:
        The ``meta.json`` contents.
    """
    input_dir, output_dir = Path(cfg.input), Path(cfg.output)
    check_replaceable(output_dir, "preprocess")  # at once, not after the decoding
    found = find_labelled_files(input_dir)
    log.info(
        "found %d image files of %d classes (%s) under %s",
        len(found.files),
        len(found.classes),
        found.layout,
        input_dir,
    )
    if found.ignored:
        log.info("left out %d files that are not photos of a class", len(found.ignored))
    decoded = decode_unique(found, cfg)
    _check_class_sizes(decoded, found.classes, cfg, input_dir)
    splits = split_indices(decoded.labels, cfg.val_fraction, cfg.test_fraction, cfg.split_seed)
    mean, std = channel_stats(decoded.pixels, np.sort(splits["train"]))
    if min(std) == 0:  # every training image one colour: nothing to learn, nothing to scale
        raise ValueError(
            f"expected photos that vary, found every training image under {input_dir} one "
            f"flat colour (std {std}); these are not photos"
        )
    meta = _meta(found, decoded, splits, cfg, mean, std)
    with atomic_directory(output_dir, "preprocess") as staging:
        for split, index in splits.items():
            save_split(staging, split, decoded.pixels, decoded.labels, index)
        _keep_photos(staging / TEST_PHOTOS_DIR, decoded.files, splits["test"])
        write_json(staging / META, meta)
    log.info(
        "kept %s, skipped %d broken files, removed %d duplicates -> %s",
        meta["kept"],
        len(decoded.skipped),
        decoded.duplicates_removed,
        output_dir,
    )
    return meta


def decode_unique(found: LabelledFiles, cfg: PreprocessConfig) -> DecodedImages:
    """Decode all files in parallel; drop broken ones and exact duplicates (same bytes)."""
    paths = [path for path, _ in found.files]
    _check_memory(len(paths), cfg)
    pixels = _output_array((len(paths), cfg.channels, cfg.image_size, cfg.image_size))
    keep: list[int] = []
    skipped: list[dict[str, Any]] = []
    first_seen: dict[str | None, list[int]] = {}
    for i, result in enumerate(_decode_in_order(paths, cfg, pixels)):
        if result.reason is not None:
            skipped.append({"file": found.name(paths[i]), "reason": result.reason})
            continue
        if result.pixels is not None:  # else a forked worker wrote them in place
            pixels[i] = result.pixels
        first_seen.setdefault(result.sha256, []).append(i)
    labels = np.array([label for _, label in found.files], np.int64)
    duplicates = 0
    for copies in first_seen.values():
        if len({labels[i] for i in copies}) > 1:
            names = ", ".join(found.name(paths[i]) for i in copies)
            skipped += [
                {
                    "file": found.name(paths[i]),
                    "reason": f"identical files under more than one class: {names}",
                }
                for i in copies
            ]
            continue
        keep.append(copies[0])
        duplicates += len(copies) - 1
    keep.sort()
    for position, index in enumerate(keep):  # the kept images to the front, in place
        if position != index:
            pixels[position] = pixels[index]
    digest_of = {copies[0]: sha for sha, copies in first_seen.items() if sha}
    digests = [digest_of[i] for i in keep]
    files = [paths[i] for i in keep]
    return DecodedImages(pixels[: len(keep)], labels[keep], digests, files, skipped, duplicates)


def _keep_photos(folder: Path, files: list[Path], index: np.ndarray) -> None:
    """A split's photo files, in its order (``00000``, ``00001``, …): the gate scores the
    alias's holder on the test split's, decoded at that model's own size.

    Each is a hard link to its input's file (the file an input that is a symbolic link
    names, never the link) where both are on one file system and the system allows it
    (the same bytes, written once: a tenth of the copies' time), else a copy. Nothing
    writes to a kept photo, and a photo changed since preprocess no longer matches the
    digest ``meta.json`` records, which evaluate checks."""
    folder.mkdir()
    for position, kept in enumerate(index):
        source, target = files[kept].resolve(), folder / f"{position:05d}"
        try:
            os.link(source, target)
        except OSError:  # another file system, or links refused (protected_hardlinks)
            shutil.copyfile(source, target)


def _check_memory(count: int, cfg: PreprocessConfig) -> None:
    """Refuse, before decoding, arrays that would not fit in the memory available: the
    machine's, or the container's limit where lower."""
    needed = count * cfg.channels * cfg.image_size**2  # the decoded array, held once
    limit = memory_limit()
    available = min(available_memory() or limit, limit)
    if needed > 0.8 * available:
        raise MemoryError(
            f"expected arrays that fit in memory: {count} images at {cfg.channels}×"
            f"{cfg.image_size}×{cfg.image_size} need about {needed / 2**30:.1f} GiB, "
            f"{available / 2**30:.1f} GiB is available; lower --image-size or use --channels 1"
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


SMALL_CLASS_SHARE = 0.2  # a class with fewer photos than this share of the largest's


def _check_class_sizes(
    decoded: DecodedImages, classes: tuple[str, ...], cfg: PreprocessConfig, input_dir: Path
) -> None:
    """Refuse a class too small for each split to hold one of its photos, naming it; warn
    of a class much smaller than the largest (its figures rest on few photos)."""
    counts = np.bincount(decoded.labels, minlength=len(classes))
    for name, count in zip(classes, counts, strict=True):
        test, val = split_sizes(int(count), cfg.val_fraction, cfg.test_fraction)
        if count - test - val < 1:
            raise ValueError(
                f"expected enough photos of class {name!r} under {input_dir} that decode to "
                f"give train, val ({cfg.val_fraction:g}) and test ({cfg.test_fraction:g}) "
                f"one each, found {count} ({len(decoded.skipped)} files skipped in all)"
            )
    for name in small_classes(classes, counts):
        log.warning(
            "class %r has %d photos, fewer than %d%% of the largest class's %d",
            name,
            counts[classes.index(name)],
            SMALL_CLASS_SHARE * 100,
            counts.max(),
        )


def small_classes(classes: tuple[str, ...], counts: np.ndarray) -> list[str]:
    """The classes with fewer photos than a fifth of the largest class's."""
    return [n for n, c in zip(classes, counts, strict=True) if c < SMALL_CLASS_SHARE * max(counts)]


def _output_array(shape: tuple[int, int, int, int]) -> np.ndarray:
    """The decoded images' uint8 array, in anonymous shared memory: workers forked from this
    process write their photos straight into it (no /dev/shm, whose size a pod limits)."""
    size = int(np.prod(shape))
    if size == 0:
        return np.empty(shape, np.uint8)
    return np.frombuffer(mmap.mmap(-1, size), np.uint8).reshape(shape)


_OUTPUT: np.ndarray | None = None  # a forked worker's view of the decoded images' array


def _share_output(pixels: np.ndarray) -> None:
    """A forked worker's start: the array it writes its photos into."""
    global _OUTPUT
    _OUTPUT = pixels


def _decode_to_output(item: tuple[int, Path], size: int, channels: int) -> images.Decoded:
    """Decode one file; a worker that shares the output array puts the pixels in their row
    and returns only the digest, so that no pixels travel back through a pipe."""
    index, path = item
    decoded = images.decode_file(path, size, channels)
    if _OUTPUT is None or decoded.pixels is None:
        return decoded
    _OUTPUT[index] = decoded.pixels
    return images.Decoded(None, decoded.sha256)


def _decode_in_order(
    paths: list[Path], cfg: PreprocessConfig, pixels: np.ndarray
) -> Iterator[images.Decoded]:
    work = functools.partial(_decode_to_output, size=cfg.image_size, channels=cfg.channels)
    progress = functools.partial(progress_bar, total=len(paths), unit="img", desc="decode")
    workers = min(cfg.workers or available_cores(), available_cores())  # no more than the cores
    if workers <= 1:
        yield from progress(map(work, enumerate(paths)))
        return
    # chunks small enough that no core idles long at the end
    chunksize = max(1, min(256, len(paths) // (workers * 32)))
    # a worker that dies raises BrokenProcessPool here instead of leaving the run waiting
    # for ever. Workers fork from this process when it runs no other thread (the step's own
    # process: no interpreter to start, 3-8% of the step), and write into the shared array;
    # else they start from a forkserver, safe when the caller has threads (fork is not),
    # which imports the decoder once for all, and send the pixels back.
    if threading.active_count() == 1:
        pool = ProcessPoolExecutor(
            workers,
            mp_context=multiprocessing.get_context("fork"),
            initializer=_share_output,
            initargs=(pixels,),
        )
    else:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([images.__name__])
        pool = ProcessPoolExecutor(workers, mp_context=context)
    with pool:
        yield from progress(pool.map(work, enumerate(paths), chunksize=chunksize))


def split_indices(
    labels: np.ndarray, val_fraction: float, test_fraction: float, seed: int
) -> dict[str, np.ndarray]:
    """Stratified, seeded split of ``range(len(labels))`` into train/val/test index arrays."""
    rng = np.random.default_rng(seed)
    parts: dict[str, list[np.ndarray]] = {split: [] for split in SPLITS}
    for label in np.unique(labels):
        index = rng.permutation(np.flatnonzero(labels == label))
        n_test, n_val = split_sizes(len(index), val_fraction, test_fraction)
        parts["test"].append(index[:n_test])
        parts["val"].append(index[n_test : n_test + n_val])
        parts["train"].append(index[n_test + n_val :])
    return {split: rng.permutation(np.concatenate(p)) for split, p in parts.items()}


def split_sizes(count: int, val_fraction: float, test_fraction: float) -> tuple[int, int]:
    """How many of a class's ``count`` photos go to test and to val: their share, and at
    least one where the share is not 0, so that every split holds every class."""
    return (
        max(round(count * test_fraction), int(test_fraction > 0)),
        max(round(count * val_fraction), int(val_fraction > 0)),
    )


def channel_stats(
    pixels: np.ndarray, rows: np.ndarray | None = None, chunk_bytes: int = 2**20
) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of the ``rows`` (all without) of uint8 N×C×H×W pixels,
    scaled to [0, 1]: from exact integer sums of the values and of their squares, a block
    of about ``chunk_bytes`` at a time (one that stays in the cache), without a float copy
    of the pixels or a copy of the rows."""
    rows = np.arange(len(pixels)) if rows is None else rows
    if len(rows) == 0:
        raise ValueError("expected at least one training image, found none")
    chunk = max(1, chunk_bytes // max(1, pixels[0].nbytes))
    sums = np.zeros(pixels.shape[1], np.uint64)
    squares = np.zeros(pixels.shape[1], np.uint64)
    for start in range(0, len(rows), chunk):
        block = pixels[rows[start : start + chunk]]
        for channel in range(pixels.shape[1]):
            values = block[:, channel]
            sums[channel] += values.sum(dtype=np.uint64)
            wide = values.astype(np.uint16)
            wide *= wide  # 255² fits in 16 bits
            squares[channel] += wide.sum(dtype=np.uint64)
    count = len(rows) * pixels.shape[2] * pixels.shape[3]
    mean = sums / count / 255.0
    std = np.sqrt(np.maximum(squares / count / 255.0**2 - mean**2, 0.0))
    return mean.round(6).tolist(), std.round(6).tolist()


def _meta(
    found: LabelledFiles,
    decoded: DecodedImages,
    splits: dict[str, np.ndarray],
    cfg: PreprocessConfig,
    mean: list[float],
    std: list[float],
) -> dict[str, Any]:
    def by_class(labels: np.ndarray) -> dict[str, int]:
        counts = np.bincount(labels, minlength=len(found.classes))
        return {name: int(n) for name, n in zip(found.classes, counts, strict=True)}

    kept = np.bincount(decoded.labels, minlength=len(found.classes))
    return {
        "classes": list(found.classes),
        "image_size": cfg.image_size,
        "channels": cfg.channels,
        "layout": found.layout,
        "counts": {split: by_class(decoded.labels[index]) for split, index in splits.items()},
        "kept": by_class(decoded.labels),
        "small_classes": small_classes(found.classes, kept),
        "skipped": decoded.skipped,
        "ignored": [found.name(p) for p in found.ignored],
        "duplicates_removed": decoded.duplicates_removed,
        "photos_sha256": {
            split: photos_sha256((decoded.digests[i], int(decoded.labels[i])) for i in index)
            for split, index in splits.items()
        },
        "mean": mean,
        "std": std,
        "config": schema.params(cfg),
        "source": _download_record(Path(cfg.input)),
    }


def _download_record(input_dir: Path) -> dict[str, Any] | None:
    """Where the photos came from, as the download step recorded it (source URI, its
    sha256 and size), or None for a folder that no download step wrote."""
    try:
        record = json.loads((input_dir / DOWNLOAD_RECORD).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    return {key: record.get(key) for key in ("source", "sha256", "bytes")}
