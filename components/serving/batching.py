"""Concurrent requests' photos through the network together: one forward pass for many."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import numpy as np


class MicroBatcher:
    """Runs ``forward`` on the photos of requests that arrive within ``wait`` seconds of
    each other, up to ``max_batch`` photos, and hands each request back its own rows.

    A request larger than ``max_batch`` runs alone. ``forward`` runs in a worker thread
    (torch releases the GIL), so the event loop keeps reading requests meanwhile.
    """

    def __init__(self, forward: Callable[[np.ndarray], np.ndarray], max_batch: int, wait: float):
        self.forward, self.max_batch, self.wait = forward, max_batch, wait
        self._queue: asyncio.Queue[tuple[np.ndarray, asyncio.Future]] | None = None
        self._worker: asyncio.Task | None = None
        self.batch_sizes: list[int] = []  # photos per forward pass, newest last (bounded)

    async def run(self, pixels: np.ndarray) -> np.ndarray:
        """``forward``'s rows for ``pixels`` (N×C×S×S), computed with whoever else waits."""
        if self._queue is None:
            self._queue = asyncio.Queue()
            self._worker = asyncio.create_task(self._serve_batches())
        done = asyncio.get_running_loop().create_future()
        await self._queue.put((pixels, done))
        return await done

    async def _serve_batches(self) -> None:
        assert self._queue is not None
        carried: tuple[np.ndarray, asyncio.Future] | None = None
        while True:
            batch = [carried or await self._queue.get()]
            carried = None
            if self.wait:
                await asyncio.sleep(self.wait)  # let concurrent requests join
            size = len(batch[0][0])
            while size < self.max_batch and not self._queue.empty():
                item = self._queue.get_nowait()
                if size + len(item[0]) > self.max_batch:
                    carried = item  # it starts the next batch
                    break
                batch.append(item)
                size += len(item[0])
            await self._run(batch)

    async def _run(self, batch: list[tuple[np.ndarray, asyncio.Future]]) -> None:
        pending = [(pixels, done) for pixels, done in batch if not done.cancelled()]
        if not pending:
            return
        stacked = np.concatenate([pixels for pixels, _ in pending])
        self.batch_sizes = [*self.batch_sizes[-999:], len(stacked)]
        try:
            rows = await asyncio.get_running_loop().run_in_executor(None, self.forward, stacked)
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
