"""Where the test suite's time goes: every Python process of the run times its calls
of a few costly functions and, at exit, its own CPU time, one JSON line each.

Run the suite with this folder first on ``PYTHONPATH`` (each step and server process the
tests start inherits it), then read the lines with ``report.py``::

    PYTHONPATH=benchmarks/suite_timing:. python -m pytest -n 3 -p suite_timeline
    python benchmarks/suite_timing/report.py
"""

import atexit
import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time

RECORDS = os.environ.get("SUITE_TIMING_DIR", "/tmp/suite-timing")
TIMED = {
    "components.training.session": ["train"],
    "components.training.loop": ["run_epoch"],
    "components.scoring.onnx_export": ["export_graph"],
    "components.tracking.logged_models": ["log_model"],
    "components.evaluation.report": ["evaluate"],
}
STARTED = time.monotonic()
PID = os.getpid()


def write(record: dict) -> None:
    os.makedirs(RECORDS, exist_ok=True)
    with open(f"{RECORDS}/{os.getpid()}.jsonl", "a") as records:
        records.write(json.dumps(record) + "\n")


def timed(module, name: str):
    """``module.name``, recording each call's wall seconds and the test that made it."""
    function = getattr(module, name)

    @functools.wraps(function)
    def call(*args, **kwargs):
        started = time.monotonic()
        try:
            return function(*args, **kwargs)
        finally:
            test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
            spent = time.monotonic() - started
            write({"function": f"{module.__name__}.{name}", "seconds": spent, "test": test})

    return call


class TimingFinder(importlib.abc.MetaPathFinder):
    """Finds the modules of ``TIMED`` as usual, and wraps their functions once loaded."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in TIMED:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            for name in TIMED[fullname]:
                setattr(module, name, timed(module, name))

        spec.loader.exec_module = exec_module
        return spec


@atexit.register
def record_process() -> None:
    if os.getpid() == PID:
        times = os.times()
        argv = sys.argv
        task = "--function_to_execute"  # kfp's executor: the op it runs
        command = f"kfp task {argv[argv.index(task) + 1]}" if task in argv else argv[0]
        wall = time.monotonic() - STARTED
        write({"process": command, "cpu": times.user + times.system, "seconds": wall})


sys.meta_path.insert(0, TimingFinder())
