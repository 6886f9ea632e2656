"""The cores a step may use: its affinity, capped by its container's CPU limit."""

from __future__ import annotations

import os

import pytest

from components.core.cores import available_cores, cpu_quota


@pytest.mark.parametrize(
    "text, expected",
    [
        ("200000 100000\n", 2),  # a Kubernetes limit of 2 CPUs
        ("150000 100000\n", 2),  # 1.5 CPUs: rounded up
        ("20000 100000\n", 1),  # 200m
        ("max 100000\n", None),  # no limit
        ("", None),
    ],
)
def test_the_cgroup_cpu_quota_is_read_in_whole_cpus(tmp_path, text, expected):
    (tmp_path / "cpu.max").write_text(text)
    assert cpu_quota(tmp_path / "cpu.max") == expected


def test_available_cores_are_the_affinity_capped_by_the_quota(tmp_path):
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    assert available_cores(tmp_path / "cpu.max") == 1
    affinity = len(os.sched_getaffinity(0))
    assert available_cores(tmp_path / "missing") == affinity
    (tmp_path / "cpu.max").write_text(f"{100000 * (affinity + 8)} 100000\n")
    assert available_cores(tmp_path / "cpu.max") == affinity  # a quota above the cores
