"""The memory a step may hold: its cgroup's limit, v1 or v2, else the machine's.

The kernel's files are laid out in a folder as Linux shows them (the kernel's
Documentation/admin-guide/cgroup-v1/memory.rst and cgroup-v2.rst, proc(5)'s mountinfo),
since a test cannot make cgroups of its own.
"""

from __future__ import annotations

import os
from pathlib import Path

from components.core.memory import memory_limit, oom_kills

PHYSICAL = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
V1_UNLIMITED = 9223372036854771712  # what v1 says of a group with no limit
V1_MOUNTS = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
35 31 0:32 {root} /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def v2_machine(tmp_path: Path, group: str, limits: dict[str, str]) -> Path:
    write(tmp_path / "proc/self/cgroup", f"0::{group}\n")
    for folder, limit in limits.items():
        write(tmp_path / "sys/fs/cgroup" / folder / "memory.max", f"{limit}\n")
    return tmp_path


def v1_machine(tmp_path: Path, group: str, limits: dict[str, int], mounted: str = "/") -> Path:
    write(tmp_path / "proc/self/cgroup", f"9:name=systemd:/\n4:memory:{group}\n1:cpu:/\n0::/\n")
    write(tmp_path / "proc/self/mountinfo", V1_MOUNTS.format(root=mounted))
    for folder, limit in limits.items():
        write(tmp_path / "sys/fs/cgroup/memory" / folder / "memory.limit_in_bytes", f"{limit}\n")
    return tmp_path


def test_a_v2_limit_on_the_group_or_above_it_caps_the_physical_memory(tmp_path):
    root = v2_machine(tmp_path, "/kubepods/pod1/step", {"kubepods/pod1": str(8 * 2**30)})
    assert memory_limit(root) == min(8 * 2**30, PHYSICAL)  # a Kubernetes limit of 8Gi
    root = v2_machine(tmp_path, "/", {"": str(PHYSICAL * 4)})  # a limit above the machine
    assert memory_limit(root) == PHYSICAL


def test_a_v1_group_of_1_gib_is_its_limit(tmp_path):
    limits = {"": V1_UNLIMITED, "process_api": V1_UNLIMITED, "process_api/step": 2**30}
    root = v1_machine(tmp_path, "/process_api/step", limits)
    assert memory_limit(root) == min(2**30, PHYSICAL)


def test_a_container_sees_its_own_v1_group_at_the_mounts_top(tmp_path):
    root = v1_machine(tmp_path, "/kubepods/pod1/c1", {"": 3 * 2**30}, mounted="/kubepods/pod1/c1")
    assert memory_limit(root) == min(3 * 2**30, PHYSICAL)


def test_no_limit_is_the_physical_memory(tmp_path):
    assert memory_limit(v2_machine(tmp_path / "v2", "/", {"": "max"})) == PHYSICAL
    unlimited = v1_machine(tmp_path / "v1", "/a", {"": V1_UNLIMITED, "a": V1_UNLIMITED})
    assert memory_limit(unlimited) == PHYSICAL
    assert memory_limit(tmp_path / "no-proc") == PHYSICAL
    assert memory_limit() <= PHYSICAL  # this machine's own files read


def test_oom_kills_are_counted_in_the_processs_own_group_v1_and_v2(tmp_path):
    v2 = v2_machine(tmp_path / "v2", "/kubepods/pod1/step", {})
    assert oom_kills(v2) == 0  # no counters: none known
    write(
        v2 / "sys/fs/cgroup/kubepods/pod1/step/memory.events",
        "low 0\nhigh 0\nmax 12\noom 2\noom_kill 2\noom_group_kill 0\n",
    )
    assert oom_kills(v2) == 2
    v1 = v1_machine(tmp_path / "v1", "/kubepods/pod1", {})
    write(
        v1 / "sys/fs/cgroup/memory/kubepods/pod1/memory.oom_control",
        "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n",
    )
    assert oom_kills(v1) == 3
