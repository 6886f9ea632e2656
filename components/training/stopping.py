"""SIGTERM, what Kubernetes sends a pod it evicts: a stop the training loop takes at its
next batch, where no MLflow call is half done.

Raised at once, as Ctrl-C's KeyboardInterrupt is, the stop could land inside a write to
the tracking store and leave its SQLite file locked: the run could then not be ended
KILLED. Taken between batches, it ends the run as Ctrl-C does (``run_log.start_run``).
A stop asked for after the last batch lets the step finish its model: seconds, within a
pod's grace period.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from components.core.errors import Terminated

_asked = threading.Event()


@contextlib.contextmanager
def stop_at_next_batch_on_sigterm() -> Iterator[None]:
    """Within the block, SIGTERM asks the training loop to stop (``stop_if_asked``)."""
    _asked.clear()
    before = signal.signal(signal.SIGTERM, lambda signum, frame: _asked.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before)


def stop_if_asked() -> None:
    """Raise ``Terminated`` (a KeyboardInterrupt, as Ctrl-C's) once SIGTERM has asked for a
    stop."""
    if _asked.is_set():
        raise Terminated("SIGTERM")
