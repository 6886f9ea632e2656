"""The CPU each test costs: a pytest plugin, and the report of what it wrote.

Each test's CPU is its worker's own (user and system) from its setup to its teardown, and
that of the processes the worker reaped meanwhile: the commands the test ran, with every
process they waited for. A server a fixture starts counts at the test whose teardown
stops it. Under pytest-xdist each worker writes its own file.

    CPU_BY_TEST=OUT PYTHONPATH=benchmarks/suite_timing python -m pytest -n 3 -p cpu_by_test
    python benchmarks/suite_timing/cpu_by_test.py OUT
"""

from __future__ import annotations

import collections
import os
import resource
import sys
from pathlib import Path

import pytest


def cpu_seconds() -> tuple[float, float]:
    """This process's CPU, and that of the children it has reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    own, children = cpu_seconds()
    yield
    own_after, children_after = cpu_seconds()
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(Path(os.environ["CPU_BY_TEST"]) / f"{worker}.tsv", "a") as out:
        out.write(f"{own_after - own:.2f}\t{children_after - children:.2f}\t{item.nodeid}\n")


def report(folder: Path, top: int = 25) -> None:
    """The tests and the modules that cost the most CPU, and the total."""
    tests, modules = [], collections.Counter()
    for path in sorted(folder.glob("*.tsv")):
        for line in path.read_text().splitlines():
            own, children, nodeid = line.split("\t")
            tests.append((float(own), float(children), nodeid))
            modules[nodeid.split("::")[0]] += float(own) + float(children)
    own_total = sum(t[0] for t in tests)
    children_total = sum(t[1] for t in tests)
    print(f"{len(tests)} tests: {own_total:.0f} CPU-s in the workers, {children_total:.0f} in "
          "the processes they reaped")  # fmt: skip
    print("test: CPU seconds (the worker's + its children's)")
    for own, children, nodeid in sorted(tests, key=lambda t: -(t[0] + t[1]))[:top]:
        print(f"  {own + children:7.1f} ({own:6.1f} + {children:6.1f})  {nodeid}")
    print("module: CPU seconds")
    for module, seconds in modules.most_common(top):
        print(f"  {seconds:7.1f}  {module}")


if __name__ == "__main__":
    report(Path(sys.argv[1]))
