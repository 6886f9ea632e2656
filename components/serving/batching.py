"""Concurrent requests' photos through the network together: one forward pass for many,
and as many passes at once as the batcher has threads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np


class MicroBatcher:
    """Runs ``forward`` on the photos of requests that arrive within ``wait`` seconds of
    each other, up to ``max_batch`` photos, and hands each request back its own rows.

    A request larger than ``max_batch`` runs alone. ``forward`` runs in worker threads,
    up to ``passes`` batches at once (torch releases the GIL), so the event loop keeps
    reading requests meanwhile; while every pass is busy, arriving requests wait together
    and the next free thread takes them as one batch. ``setup`` runs once in each thread
    before its first pass.
    """

    def __init__(
        self,
        forward: Callable[[np.ndarray], np.ndarray],
        max_batch: int,
        wait: float,
        passes: int = 1,
        setup: Callable[[], None] | None = None,
    ):
        self.forward, self.max_batch, self.wait, self.passes = forward, max_batch, wait, passes
        self.threads = ThreadPoolExecutor(passes, "forward", initializer=setup)
        self._queue: asyncio.Queue[tuple[np.ndarray, asyncio.Future[np.ndarray]]] | None = None
        self._worker: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()
        self.batch_sizes: list[int] = []  # photos per forward pass, newest last (bounded)

    async def run(self, pixels: np.ndarray) -> np.ndarray:
        """``forward``'s rows for ``pixels`` (N×C×S×S), computed with whoever else waits."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._serve_batches())
        done = asyncio.get_running_loop().create_future()
        await self._queue.put((pixels, done))
        rows: np.ndarray = await done
        return rows

    async def _serve_batches(self) -> None:
        assert self._queue is not None
        free = asyncio.Semaphore(self.passes)
        carried: tuple[np.ndarray, asyncio.Future[np.ndarray]] | None = None
        while True:
            first = carried or await self._queue.get()
            carried = None
            await free.acquire()  # requests arriving meanwhile join this batch
            batch = [first]
            if self.wait and self._queue.empty():
                await asyncio.sleep(self.wait)  # alone so far: let concurrent requests join
            size = len(first[0])
            while size < self.max_batch and not self._queue.empty():
                item = self._queue.get_nowait()
                if size + len(item[0]) > self.max_batch:
                    carried = item  # it starts the next batch
                    break
                batch.append(item)
                size += len(item[0])
            task = asyncio.create_task(self._run(batch))
            self._running.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self._running.discard)
            task.add_done_callback(lambda _: free.release())

    async def _run(self, batch: list[tuple[np.ndarray, asyncio.Future[np.ndarray]]]) -> None:
        pending = [(pixels, done) for pixels, done in batch if not done.cancelled()]
        if not pending:
            return
        stacked = np.concatenate([pixels for pixels, _ in pending])
        self.batch_sizes = [*self.batch_sizes[-999:], len(stacked)]
        loop = asyncio.get_running_loop()
        try:
            rows = await loop.run_in_executor(self.threads, self.forward, stacked)
        except Exception as err:  # noqa: BLE001 - every waiting request gets the error
            for _, done in pending:
                if not done.done():
                    done.set_exception(err)
            return
        start = 0
        for pixels, done in pending:
            if not done.done():
                done.set_result(rows[start : start + len(pixels)])
            start += len(pixels)
