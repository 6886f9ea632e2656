"""A train process keeps the memory it frees, and faults it in once instead of every batch."""

import platform
import subprocess
import sys

import pytest

from components.training import heap, runtime

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="mallopt's thresholds are glibc's"
)

BLOCKS, BLOCK_BYTES = 10, 8 * 2**20
PAGES = BLOCKS * BLOCK_BYTES // 4096

# three rounds of a batch's worth of blocks, allocated, written and freed; the page
# faults of each round
PROGRAM = f"""
import ctypes, resource, sys
from components.training.heap import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
for _ in range(3):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    blocks = [libc.malloc({BLOCK_BYTES}) for _ in range({BLOCKS})]
    for block in blocks:
        ctypes.memset(block, 1, {BLOCK_BYTES})
    for block in blocks:
        libc.free(block)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.parametrize("mode", ["keep", "default"])
def test_freed_blocks_are_reused_without_faulting_them_in_again(mode):
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    first, *later = (int(line) for line in done.stdout.split())
    assert first >= PAGES // 2  # the first round faults its pages in either way
    if mode == "keep":
        assert max(later) < PAGES // 10
    else:  # glibc's own thresholds hand the blocks back: this test can tell
        assert min(later) >= PAGES // 2


def test_a_train_process_keeps_its_freed_memory():
    heap.keep_freed_memory.cache_clear()
    runtime.start("cpu")
    assert heap.keep_freed_memory.cache_info().currsize == 1
