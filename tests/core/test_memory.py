"""The memory a step may hold: its container's limit, else the machine's."""

from __future__ import annotations

import os

from components.core.memory import memory_limit

PHYSICAL = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_the_cgroup_limit_caps_the_physical_memory(tmp_path):
    (tmp_path / "memory.max").write_text(f"{8 * 2**30}\n")  # a Kubernetes limit of 8Gi
    assert memory_limit(tmp_path / "memory.max") == min(8 * 2**30, PHYSICAL)
    (tmp_path / "memory.max").write_text(f"{PHYSICAL * 4}\n")  # a limit above the machine
    assert memory_limit(tmp_path / "memory.max") == PHYSICAL


def test_no_limit_is_the_physical_memory(tmp_path):
    (tmp_path / "memory.max").write_text("max\n")
    assert memory_limit(tmp_path / "memory.max") == PHYSICAL
    assert memory_limit(tmp_path / "missing") == PHYSICAL
