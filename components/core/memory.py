"""How much memory this process may hold: its cgroup's limit, else the machine's.

The limit is read where the kernel keeps it for this process (``/proc/self/cgroup``), in
cgroup v2 (``memory.max``) and in cgroup v1 (``memory.limit_in_bytes`` under the memory
controller's mount, found in ``/proc/self/mountinfo``), for the process's own group and
every group above it: a group inherits its parents' limits. No limit in ``max`` (v2) or
as a number past the machine's memory (v1's "unlimited" is 2**63 rounded to a page).
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath

V2_LIMIT, V1_LIMIT = "memory.max", "memory.limit_in_bytes"


def memory_limit(root: Path = Path("/")) -> int:
    """The lowest cgroup memory limit over this process's groups, in bytes (a Kubernetes
    memory limit), else the physical memory: a pod limited to 8 GiB on a 512 GiB node
    gets 8 GiB. ``root`` is where ``/proc`` and ``/sys`` are (another folder in tests)."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return min([physical, *cgroup_limits(root)])


def cgroup_limits(root: Path) -> list[int]:
    """Every memory limit set on this process's cgroups and their parents, v1 and v2."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return []
    limits = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        if hierarchy == "0" and not controllers:  # the v2 hierarchy
            limits += _limits_up(root / "sys/fs/cgroup", group, V2_LIMIT)
        elif "memory" in controllers.split(","):  # v1's memory controller
            mount, mounted_group = _v1_memory_mount(root)
            relative = group.removeprefix(mounted_group) if mounted_group != "/" else group
            limits += _limits_up(mount, relative, V1_LIMIT)
    return limits


def _limits_up(base: Path, group: str, name: str) -> list[int]:
    """The numbers in file ``name`` of cgroup ``group`` under ``base`` and of each group
    above it (a file missing or saying ``max`` sets none)."""
    path = PurePosixPath("/", group)
    limits = []
    for folder in (path, *path.parents):
        try:
            text = (base / str(folder).lstrip("/") / name).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return limits


def _v1_memory_mount(root: Path) -> tuple[Path, str]:
    """Where v1's memory controller is mounted, and the group its mount shows as its top
    (a container sees its own group there)."""
    try:
        lines = (root / "proc/self/mountinfo").read_text().splitlines()
    except OSError:
        lines = []
    for line in lines:
        mount, _, filesystem = line.partition(" - ")
        fields, kind = mount.split(), filesystem.split()
        if len(fields) >= 5 and len(kind) >= 3 and kind[0] == "cgroup":
            if "memory" in kind[2].split(","):
                return root / fields[4].lstrip("/"), fields[3]
    return root / "sys/fs/cgroup/memory", "/"


def oom_kills(root: Path = Path("/")) -> int:
    """How many processes the kernel's OOM killer has ended in this process's own cgroup
    (v2 ``memory.events``, v1 ``memory.oom_control``): 0 where unknown."""
    try:
        lines = (root / "proc/self/cgroup").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        if hierarchy == "0" and not controllers:
            counters = root / "sys/fs/cgroup" / group.lstrip("/") / "memory.events"
        elif "memory" in controllers.split(","):
            mount, mounted_group = _v1_memory_mount(root)
            relative = group.removeprefix(mounted_group) if mounted_group != "/" else group
            counters = mount / relative.lstrip("/") / "memory.oom_control"
        else:
            continue
        try:
            for counter in counters.read_text().splitlines():
                name, _, value = counter.partition(" ")
                if name == "oom_kill" and value.strip().isdigit():
                    return int(value)
        except OSError:
            continue
    return 0
