"""Concurrent requests share forward passes, and each gets its own rows back."""

from __future__ import annotations

import asyncio

import numpy as np

from components.serving.batching import MicroBatcher


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
