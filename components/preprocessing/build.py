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
from collections.abc import Callable, Iterator
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
from components.core.progress import logged
from components.core.progress import progress as progress_bar
from components.data import images
from components.data.arrays import META, SPLITS, photos_sha256
from components.data.layout import LabelledFiles, find_labelled_files
from components.data.shards import write_shard
from components.preprocessing.config import PreprocessConfig

log = logging.getLogger(__name__)


@dataclass
class Survey:
    """The files to decode, one of each set of identical files, in listing order; what
    was left out unread, and how many exact copies were dropped."""

    files: list[Path]
    labels: np.ndarray
    digests: list[str]  # each file's sha256, in the same order
    name: Callable[[Path], str]  # a file's name as the run reports it
    skipped: list[dict[str, Any]] = field(default_factory=list)
    duplicates_removed: int = 0
    copies: dict[str, list[Path]] = field(default_factory=dict)  # a digest's dropped copies


@dataclass
class WrittenSplit:
    """One split as written: its shards, the kept photos' labels, digests and files, in
    order, and the exact sums of its pixel values and their squares by channel."""

    shards: list[dict[str, Any]] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    sums: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    squares: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))


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
    per_shard = shard_photos(cfg)
    _check_memory(min(per_shard, len(found.files)), cfg)
    _check_disk(len(found.files), cfg, output_dir)
    with Decoder(cfg, min(per_shard, max(1, len(found.files)))) as decoder:
        survey = survey_files(found, decoder)
        _check_class_sizes(survey.labels, found.classes, cfg, input_dir, len(survey.skipped))
        splits = split_indices(survey.labels, cfg.val_fraction, cfg.test_fraction, cfg.split_seed)
        with atomic_directory(output_dir, "preprocess") as staging:
            written = write_splits(staging, splits, survey, decoder, per_shard)
            _check_every_class_kept(written, found.classes, cfg, input_dir, survey)
            mean, std = channel_stats(written["train"], cfg.image_size)
            if min(std) == 0:  # every training image one colour: nothing to learn, nothing to scale
                raise ValueError(
                    f"expected photos that vary, found every training image under {input_dir} "
                    f"one flat colour (std {std}); these are not photos"
                )
            _keep_photos(staging / TEST_PHOTOS_DIR, written["test"].files)
            meta = _meta(found, survey, written, cfg, mean, std)
            write_json(staging / META, meta)
    log.info(
        "kept %s, skipped %d broken files, removed %d duplicates -> %s",
        meta["kept"],
        len(meta["skipped"]),
        survey.duplicates_removed,
        output_dir,
    )
    return meta


def shard_photos(cfg: PreprocessConfig) -> int:
    """How many photos a shard holds: as many as ``cfg.shard_mb`` takes, one at the least."""
    return max(1, cfg.shard_mb * 2**20 // (cfg.channels * cfg.image_size**2))


def survey_files(found: LabelledFiles, decoder: Decoder) -> Survey:
    """Hash every file (no decoding) and keep the first of each set of identical files;
    identical files under more than one class are all left out, and reported."""
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
            copies[digest] = [paths[i] for i in seen[1:]]
    keep.sort()
    digest_of = {seen[0]: digest for digest, seen in first_seen.items()}
    return Survey(
        [paths[i] for i in keep],
        np.array([labels[i] for i in keep], np.int64),
        [digest_of[i] for i in keep],
        found.name,
        skipped,
        duplicates,
        copies,
    )


def write_splits(
    directory: Path,
    splits: dict[str, np.ndarray],
    survey: Survey,
    decoder: Decoder,
    per_shard: int,
) -> dict[str, WrittenSplit]:
    """Decode and write each split a shard at a time: test and val first, each of their
    photos that does not decode replaced by a photo of its class drawn from train's (so
    that they keep their share of every class), then train."""
    spares = Spares(splits["train"], survey.labels)
    written = {
        split: write_split(directory, split, splits[split], survey, decoder, per_shard, spares)
        for split in ("test", "val")
    }
    train = np.array([i for i in splits["train"] if i not in spares.taken], np.int64)
    written["train"] = write_split(directory, "train", train, survey, decoder, per_shard, None)
    return {split: written[split] for split in SPLITS}


class Spares:
    """Train's files by class, from the end of its order: what replaces a test or val
    photo that does not decode."""

    def __init__(self, train: np.ndarray, labels: np.ndarray):
        self.left = {int(label): [int(i) for i in train if labels[i] == label]
                     for label in np.unique(labels[train])}  # fmt: skip
        self.taken: set[int] = set()

    def take(self, label: int) -> int | None:
        """The next spare of class ``label``, or None when none is left."""
        left = self.left.get(label, [])
        if not left:
            return None
        self.taken.add(left[-1])
        return left.pop()


def write_split(
    directory: Path,
    split: str,
    index: np.ndarray,
    survey: Survey,
    decoder: Decoder,
    per_shard: int,
    spares: Spares | None,
) -> WrittenSplit:
    """Decode the surveyed files at ``index`` a shard at a time and write each shard's
    photos that decode; a file that does not (or changed since it was hashed) is skipped,
    with its dropped copies, recorded in ``survey.skipped`` and replaced from ``spares``
    where given."""
    written = WrittenSplit()
    chunks = [index[start : start + per_shard] for start in range(0, len(index), per_shard)]
    for number, chunk in enumerate(chunks or [index]):
        kept: list[int] = []
        lost: list[int] = []
        for position, result in enumerate(decoder.decode([survey.files[i] for i in chunk])):
            if not _decoded(result, int(chunk[position]), survey):
                lost.append(int(chunk[position]))
                continue
            if result.pixels is not None:  # else a forked worker wrote them in place
                decoder.buffer[position] = result.pixels
            if len(kept) != position:  # the kept photos to the front, in place
                decoder.buffer[len(kept)] = decoder.buffer[position]
            kept.append(int(chunk[position]))
        if spares is not None:
            kept += _replaced(lost, spares, survey, decoder, len(kept))
        pixels = decoder.buffer[: len(kept)]
        labels = survey.labels[kept]
        written.shards.append(write_shard(directory, split, number, pixels, labels))
        log.info(
            "wrote %s shard %d of %d: %d photos (%d files did not decode)",
            split, number + 1, max(1, len(chunks)), len(kept), len(lost),
        )  # fmt: skip
        written.labels += labels.tolist()
        written.digests += [survey.digests[i] for i in kept]
        written.files += [survey.files[i] for i in kept]
        sums, squares = channel_sums(pixels)
        written.sums = sums if not len(written.sums) else written.sums + sums
        written.squares = squares if not len(written.squares) else written.squares + squares
    return written


def _replaced(
    lost: list[int], spares: Spares, survey: Survey, decoder: Decoder, start: int
) -> list[int]:
    """Spares of the ``lost`` files' classes that decode, one for each where one is left,
    decoded here into ``decoder.buffer`` from row ``start`` on."""
    replacements: list[int] = []
    for surveyed in lost:
        while (spare := spares.take(int(survey.labels[surveyed]))) is not None:
            result = decoder.decode_here(survey.files[spare])
            if _decoded(result, spare, survey) and result.pixels is not None:
                decoder.buffer[start + len(replacements)] = result.pixels
                replacements.append(spare)
                break
    return replacements


def _decoded(result: images.Decoded, surveyed: int, survey: Survey) -> bool:
    """Whether surveyed file ``surveyed`` decoded as the file it was when hashed; if not,
    it and its dropped copies are recorded in ``survey.skipped`` with the reason."""
    reason = result.reason
    if reason is None and result.sha256 != survey.digests[surveyed]:
        reason = "the file changed while preprocess read it"
    if reason is None:
        return True
    copies = survey.copies.get(survey.digests[surveyed], [])
    for file in (survey.files[surveyed], *copies):
        survey.skipped.append({"file": survey.name(file), "reason": reason})
    survey.duplicates_removed -= len(copies)
    return False


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
        source, target = file.resolve(), folder / f"{position:05d}"
        try:
            os.link(source, target)
        except OSError:  # another file system, or links refused (protected_hardlinks)
            shutil.copyfile(source, target)


def _check_memory(count: int, cfg: PreprocessConfig) -> None:
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


SMALL_CLASS_SHARE = 0.2  # a class with fewer photos than this share of the largest's


def _check_class_sizes(
    labels: np.ndarray,
    classes: tuple[str, ...],
    cfg: PreprocessConfig,
    input_dir: Path,
    skipped: int,
) -> None:
    """Refuse a class too small for each split to hold one of its photos, naming it; warn
    of a class much smaller than the largest (its figures rest on few photos)."""
    counts = np.bincount(labels, minlength=len(classes))
    for name, count in zip(classes, counts, strict=True):
        test, val = split_sizes(int(count), cfg.val_fraction, cfg.test_fraction)
        if count - test - val < 1:
            raise ValueError(
                f"expected enough photos of class {name!r} under {input_dir} that decode to "
                f"give train, val ({cfg.val_fraction:g}) and test ({cfg.test_fraction:g}) "
                f"one each, found {count} ({skipped} files skipped in all)"
            )
    for name in small_classes(classes, counts):
        log.warning(
            "class %r has %d photos, fewer than %d%% of the largest class's %d",
            name,
            counts[classes.index(name)],
            SMALL_CLASS_SHARE * 100,
            counts.max(),
        )


def _check_every_class_kept(
    written: dict[str, WrittenSplit],
    classes: tuple[str, ...],
    cfg: PreprocessConfig,
    input_dir: Path,
    survey: Survey,
) -> None:
    """Refuse a split left without a class once the files that do not decode are out."""
    kept = np.bincount(
        np.array([label for held in written.values() for label in held.labels], np.int64),
        minlength=len(classes),
    )
    for held in written.values():
        counts = np.bincount(np.array(held.labels, np.int64), minlength=len(classes))
        if len(held.labels) and counts.min() == 0:
            name = classes[int(np.argmin(counts))]
            raise ValueError(
                f"expected enough photos of class {name!r} under {input_dir} that decode to "
                f"give train, val ({cfg.val_fraction:g}) and test ({cfg.test_fraction:g}) "
                f"one each, found {kept[classes.index(name)]} ({len(survey.skipped)} files "
                "skipped in all)"
            )


def small_classes(classes: tuple[str, ...], counts: np.ndarray) -> list[str]:
    """The classes with fewer photos than a fifth of the largest class's."""
    return [n for n, c in zip(classes, counts, strict=True) if c < SMALL_CLASS_SHARE * max(counts)]


class Decoder:
    """Processes that hash and decode photos, and the one shard's array they decode into.

    Workers forked from this process when it runs no other thread (the step's own process:
    no interpreter to start, 3-8% of the step) write their photos straight into
    ``buffer``, anonymous shared memory (not /dev/shm, whose size a pod limits), so no
    pixels travel back through a pipe; else they start from a forkserver, safe when the
    caller has threads (fork is not), and send the pixels back. A worker that dies raises
    BrokenProcessPool instead of leaving the step waiting for ever.
    """

    def __init__(self, cfg: PreprocessConfig, rows: int):
        self.size, self.channels = cfg.image_size, cfg.channels
        shape = (rows, cfg.channels, cfg.image_size, cfg.image_size)
        self.buffer = np.frombuffer(mmap.mmap(-1, int(np.prod(shape))), np.uint8).reshape(shape)
        self.workers = min(cfg.workers or available_cores(), available_cores())
        self.pool: ProcessPoolExecutor | None = None
        if self.workers > 1 and threading.active_count() == 1:
            self.pool = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_share_output,
                initargs=(self.buffer,),
            )
        elif self.workers > 1:
            context = multiprocessing.get_context("forkserver")
            context.set_forkserver_preload([images.__name__])
            self.pool = ProcessPoolExecutor(self.workers, mp_context=context)

    def __enter__(self) -> Decoder:
        return self

    def __exit__(self, *failure: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)

    def decode_here(self, path: Path) -> images.Decoded:
        """One file decoded in this process, its pixels in ``pixels``."""
        return images.decode_file(path, self.size, self.channels)

    def digests(self, paths: list[Path]) -> Iterator[images.Decoded]:
        """Each file's sha256 (or why it is skipped), in order."""
        yield from self._map(images.digest_file, paths, "hash", logs=True)

    def decode(self, paths: list[Path]) -> Iterator[images.Decoded]:
        """Each file decoded, in order: the i-th's pixels in ``buffer[i]`` where a forked
        worker wrote them (``pixels`` None), else in ``pixels``."""
        work = functools.partial(_decode_to_output, size=self.size, channels=self.channels)
        yield from self._map(work, list(enumerate(paths)), "decode")

    def _map(
        self, work: Any, items: list[Any], desc: str, logs: bool = False
    ) -> Iterator[images.Decoded]:
        if self.pool is None:
            done: Iterator[images.Decoded] = map(work, items)
        else:  # chunks small enough that no core idles long at the end
            chunksize = max(1, min(256, len(items) // (self.workers * 32)))
            done = self.pool.map(work, items, chunksize=chunksize)
        bar = progress_bar(done, total=len(items), unit="img", desc=desc)
        yield from logged(bar, len(items), f"{desc}ed", "photos") if logs else bar


_OUTPUT: np.ndarray | None = None  # a forked worker's view of the shard's array


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


def channel_stats(train: WrittenSplit, side: int) -> tuple[list[float], list[float]]:
    """Per-channel mean and std of the train split's pixels, scaled to [0, 1], from its
    exact sums."""
    if not train.labels:
        raise ValueError("expected at least one training image, found none")
    count = len(train.labels) * side * side
    mean = train.sums / count / 255.0
    std = np.sqrt(np.maximum(train.squares / count / 255.0**2 - mean**2, 0.0))
    return mean.round(6).tolist(), std.round(6).tolist()


def _meta(
    found: LabelledFiles,
    survey: Survey,
    written: dict[str, WrittenSplit],
    cfg: PreprocessConfig,
    mean: list[float],
    std: list[float],
) -> dict[str, Any]:
    def by_class(labels: list[int]) -> dict[str, int]:
        counts = np.bincount(np.array(labels, np.int64), minlength=len(found.classes))
        return {name: int(n) for name, n in zip(found.classes, counts, strict=True)}

    kept = [label for held in written.values() for label in held.labels]
    counts = np.bincount(np.array(kept, np.int64), minlength=len(found.classes))
    return {
        "classes": list(found.classes),
        "image_size": cfg.image_size,
        "channels": cfg.channels,
        "layout": found.layout,
        "counts": {split: by_class(held.labels) for split, held in written.items()},
        "kept": by_class(kept),
        "small_classes": small_classes(found.classes, counts),
        "skipped": survey.skipped,
        "ignored": [found.name(p) for p in found.ignored],
        "duplicates_removed": survey.duplicates_removed,
        "photos_sha256": {
            split: photos_sha256(zip(held.digests, held.labels, strict=True))
            for split, held in written.items()
        },
        "shards": {split: held.shards for split, held in written.items()},
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
