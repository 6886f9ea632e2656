"""A pytest plugin: each test's start and end on its worker, one line each."""

import os
import time

from sitecustomize import write

started: dict[str, float] = {}


def pytest_runtest_logstart(nodeid, location):
    started[nodeid] = time.time()


def pytest_runtest_logfinish(nodeid, location):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker:  # the controller reports every worker's tests again
        write({"test": nodeid, "worker": worker, "start": started.pop(nodeid), "end": time.time()})
