"""How much memory this process may hold: its container's limit, else the machine's."""

from __future__ import annotations

import os
from pathlib import Path

CGROUP_MEMORY_MAX = Path("/sys/fs/cgroup/memory.max")  # cgroup v2: bytes, or "max"


def memory_limit(memory_max: Path = CGROUP_MEMORY_MAX) -> int:
    """The cgroup's memory limit in bytes (a Kubernetes memory limit), else the physical
    memory: a pod limited to 8 GiB on a 512 GiB node gets 8 GiB."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        text = memory_max.read_text().strip()
    except OSError:
        return physical
    return min(int(text), physical) if text.isdigit() else physical
