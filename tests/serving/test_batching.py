"""Concurrent requests share forward passes, and each gets its own rows back."""

from __future__ import annotations

import asyncio
import threading

import numpy as np

from components.serving.batching import MicroBatcher
from tests.support.processes import START_HANG_SECONDS


def doubled(pixels: np.ndarray, calls: list[int]) -> np.ndarray:
    calls.append(len(pixels))
    return pixels.reshape(len(pixels), -1)[:, :2] * 2


def requests(*sizes: int) -> list[np.ndarray]:
    """One array a request: ``size`` rows, each row's values its request and row number."""
    return [
        np.array([[[[100 * r + i, 100 * r + i]]] for i in range(size)], np.float32)
        for r, size in enumerate(sizes)
    ]


async def answer(batcher: MicroBatcher, arrays: list[np.ndarray]) -> list[np.ndarray]:
    return await asyncio.gather(*(batcher.run(a) for a in arrays))


def test_concurrent_requests_share_one_pass_and_get_their_own_rows():
    calls: list[int] = []
    batcher = MicroBatcher(lambda p: doubled(p, calls), max_batch=64, wait=0.05)
    arrays = requests(1, 3, 2, 1)
    rows = asyncio.run(answer(batcher, arrays))
    assert calls == [7]  # one forward pass for the four requests
    for array, got in zip(arrays, rows, strict=True):
        assert np.array_equal(got, array.reshape(len(array), -1)[:, :2] * 2)


def test_a_batch_never_passes_the_maximum_and_a_larger_request_runs_alone():
    calls: list[int] = []
    batcher = MicroBatcher(lambda p: doubled(p, calls), max_batch=4, wait=0.05)
    arrays = requests(1, 2, 1, 6, 3)
    rows = asyncio.run(answer(batcher, arrays))
    assert calls == [4, 6, 3]  # 1+2+1 fill one pass; 6 alone; 3 after it
    assert [len(r) for r in rows] == [1, 2, 1, 6, 3]


def test_a_failed_pass_fails_each_request_in_it_and_the_next_pass_runs():
    calls: list[int] = []

    def flaky(pixels):
        calls.append(len(pixels))
        if len(calls) == 1:
            raise RuntimeError("out of memory")
        return doubled(pixels, [])

    batcher = MicroBatcher(flaky, max_batch=64, wait=0.05)

    async def scenario():
        first = await asyncio.gather(
            *(batcher.run(a) for a in requests(1, 1)), return_exceptions=True
        )
        second = await batcher.run(requests(2)[0])
        return first, second

    first, second = asyncio.run(scenario())
    assert [type(e) for e in first] == [RuntimeError, RuntimeError]
    assert second.shape == (2, 2)


def test_passes_run_at_once_each_thread_set_up_first():
    # broken unless two passes run together (the limit: a hang, not a busy machine)
    both_in = threading.Barrier(2, timeout=START_HANG_SECONDS)
    set_up: list[str] = []

    def meeting(pixels):
        both_in.wait()
        return doubled(pixels, [])

    batcher = MicroBatcher(
        meeting,
        max_batch=2,
        wait=0,
        passes=2,
        setup=lambda: set_up.append(threading.current_thread().name),
    )
    rows = asyncio.run(answer(batcher, requests(2, 2)))
    assert [len(r) for r in rows] == [2, 2]
    assert len(set(set_up)) == 2  # once in each of the two threads


def test_requests_that_find_others_waiting_go_at_once_without_the_wait(monkeypatch):
    calls: list[int] = []
    started = threading.Event()
    release = threading.Event()
    batch_waits: list[float] = []
    sleep = asyncio.sleep

    async def counted_sleep(delay: float) -> None:
        if delay == batcher.wait:  # the batcher's own wait for others to join
            batch_waits.append(delay)
        await sleep(delay)

    def held(pixels):
        if not started.is_set():
            started.set()
            release.wait(START_HANG_SECONDS)  # the first pass runs while three more queue
        return doubled(pixels, calls)

    batcher = MicroBatcher(held, max_batch=64, wait=0.05, passes=1)
    monkeypatch.setattr(asyncio, "sleep", counted_sleep)

    async def scenario():
        first = asyncio.ensure_future(batcher.run(requests(1)[0]))
        while not started.is_set():
            await sleep(0.01)
        queued = [asyncio.ensure_future(batcher.run(a)) for a in requests(1, 1, 1)]
        while batcher._queue.qsize() < 2:  # one is taken for the next batch, two wait
            await sleep(0.01)
        release.set()
        await asyncio.gather(first, *queued)

    asyncio.run(scenario())
    assert calls == [1, 3]  # the first alone, after the wait; the queued three as one
    assert batch_waits == [0.05]  # no second wait: they were already waiting
