"""A step's process leaves its heap to the OS at exit, and ends as it did otherwise."""

import subprocess
import sys

import pytest

# a cycle of garbage whose finalizer speaks: only a collection at exit can reach it
PROGRAM = """
import atexit, sys
from components.core.shutdown import skip_final_collection
if sys.argv[1] == "skip":
    skip_final_collection()
    skip_final_collection()
class Cycle:
    def __del__(self):
        print("collected")
cycle = Cycle()
cycle.me = cycle
del cycle
with open(sys.argv[2], "w") as report:
    report.write("written")
atexit.register(print, "exit handler ran")
print("unended line", end="")  # stdout's buffer: flushed at exit
"""


@pytest.mark.parametrize("mode", ["skip", "keep"])
def test_the_last_collection_is_skipped_and_nothing_else(mode, tmp_path):
    report = tmp_path / "report.txt"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode, str(report)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # without it, the interpreter's own collection finds the cycle: this test can tell
    ended = ["unended lineexit handler ran"]
    assert lines == (ended if mode == "skip" else [*ended, "collected"])
    assert report.read_text() == "written"
