"""Processes that hash and decode photos for preprocess, into one shard's shared array."""

from __future__ import annotations

import functools
import mmap
import multiprocessing
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from components.core.cores import available_cores
from components.core.progress import logged
from components.core.progress import progress as progress_bar
from components.data import images
from components.preprocessing.config import PreprocessConfig


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
