"""How many CPU cores this process may use: its affinity, capped by its container's CPU limit."""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "QUOTA PERIOD" or "max PERIOD"


def available_cores(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The cores this process may run on, at most its CPU quota (a Kubernetes CPU limit)
    rounded up: a pod limited to 2 CPUs on a 64-core node gets 2, not 64."""
    if hasattr(os, "sched_getaffinity"):
        cores = len(os.sched_getaffinity(0))
    else:
        cores = os.cpu_count() or 1
    quota = cpu_quota(cpu_max)
    return min(cores, quota) if quota else cores


def cpu_quota(cpu_max: Path = CGROUP_CPU_MAX) -> int | None:
    """The cgroup's CPU quota in whole CPUs, rounded up; None where there is none."""
    try:
        quota, period = cpu_max.read_text().split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None
