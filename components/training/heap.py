"""Freed memory kept in the process's heap, for the next batch to reuse."""

from __future__ import annotations

import ctypes
import functools

# mallopt's parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # glibc's largest: blocks above it are always mapped apart
TRIM_THRESHOLD = 2**30  # freed memory at the heap's top kept, up to this much


@functools.cache  # once a process
def keep_freed_memory() -> bool:
    """Keep the memory a train step frees for its next batch instead of handing it back.

    A train step on a CPU allocates and frees tens of megabytes of activations a batch.
    glibc's malloc, left to itself, maps many such blocks apart or trims them off its heap
    as they are freed, and the next batch faults them in again a page at a time: millions
    of page faults and seconds of kernel time an epoch of the cpu preset
    (docs/BENCHMARKS.md). A fixed mmap threshold at glibc's largest and a trim threshold
    of 1 GiB keep them in the heap. The peak memory is the same: what is kept is what the
    step held at once.

    Returns:
        Whether the C library took both settings: False where it is not glibc.
    """
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)
    if mallopt is None:
        return False
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
