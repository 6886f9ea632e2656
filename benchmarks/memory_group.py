"""Run a command inside a memory cgroup with a limit, as a pod's memory limit runs it.

Reports whether the kernel's OOM killer ended anything in the group, the command's exit
status, its wall time, the largest process's peak resident memory, and the group's peak
of memory that cannot be dropped (anonymous and shared memory, sampled every 0.2 s),
besides the group's peak with the page cache, which the kernel reclaims under the limit.
Needs root and a writable cgroup memory controller (v1 or v2).

    python -m benchmarks.memory_group --limit-gib 4 -- python -m components.preprocess ...
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")


class MemoryGroup:
    """A new cgroup under the memory controller, limited to ``limit`` bytes."""

    def __init__(self, limit: int):
        self.v1 = (V1 / "memory.limit_in_bytes").exists()
        self.path = (V1 if self.v1 else V2) / f"bench-{uuid.uuid4().hex[:8]}"
        self.path.mkdir()
        (self.path / ("memory.limit_in_bytes" if self.v1 else "memory.max")).write_text(str(limit))
        if not self.v1:
            (self.path / "memory.swap.max").write_text("0")

    def enter(self) -> None:
        """Move the calling process into the group (a child's start)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def stat(self) -> dict[str, int]:
        lines = (self.path / "memory.stat").read_text().splitlines()
        return {key: int(value) for key, value in (line.split() for line in lines)}

    def held(self) -> int:
        """Bytes of memory the kernel cannot drop: anonymous and shared memory."""
        stat = self.stat()
        if self.v1:
            return stat.get("total_rss", 0) + stat.get("total_shmem", 0)
        return stat.get("anon", 0) + stat.get("shmem", 0)

    def peak(self) -> int:
        name = "memory.max_usage_in_bytes" if self.v1 else "memory.peak"
        return int((self.path / name).read_text())

    def oom_kills(self) -> int:
        name = "memory.oom_control" if self.v1 else "memory.events"
        for line in (self.path / name).read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        self.path.rmdir()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit-gib", type=float, required=True)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    group = MemoryGroup(int(args.limit_gib * 2**30))
    most_held, running = 0, True

    def sample() -> None:
        nonlocal most_held
        while running:
            most_held = max(most_held, group.held())
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    try:
        done = subprocess.run(command, preexec_fn=group.enter, check=False)
    finally:
        running = False
        sampler.join()
    seconds = time.perf_counter() - started
    largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    result = {
        "limit_gib": args.limit_gib,
        "exit_status": done.returncode,
        "oom_kills": group.oom_kills(),
        "seconds": round(seconds, 1),
        "largest_process_peak_rss_gib": round(largest / 2**30, 3),
        "group_peak_held_gib": round(most_held / 2**30, 3),
        "group_peak_with_page_cache_gib": round(group.peak() / 2**30, 3),
        "cgroup": "v1" if group.v1 else "v2",
    }
    group.remove()
    print(json.dumps(result), flush=True)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
