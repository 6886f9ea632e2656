"""No process outlives the test session: find, report and stop what the tests left running.

pytest makes itself a child subreaper (Linux), so a server's worker whose parent died is
re-parented to pytest instead of init and is still found here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
# the limit on a test's subprocess: reached only by a hang, never by a slow or busy machine
HANG_SECONDS = 3600
# the wait for a test's server to come up: a started server that answers nothing this long
# hangs (one that exits fails at once)
START_HANG_SECONDS = 600
# helpers of this very process that exit with it (their pipe to it closes)
OWN_HELPERS = ("multiprocessing.forkserver", "multiprocessing.resource_tracker")


def become_subreaper() -> None:
    """Adopt orphaned descendants, so that they can be found and stopped."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process, or None once it is gone."""
    with contextlib.suppress(OSError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return fields[0], int(fields[1])
    return None


def _command(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    return ""


def descendants(root: int) -> dict[int, int]:
    """Live descendants of ``root`` (zombies excluded), each with its parent's pid."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (stat := _stat(int(entry.name))) and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry.name))
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        found.update({child: pid for pid in frontier for child in children.get(pid, [])})
        frontier = [child for pid in frontier for child in children.get(pid, [])]
    return found


def leftovers(root: int, grace: float = 5.0) -> dict[int, str]:
    """Descendants of ``root`` that should not be running any more, with their commands.

    ``root``'s own multiprocessing helpers are not counted (they exit with it); anything
    they started is. A process already exiting (its command line gone, as a pytest-xdist
    worker's is while it shuts down) gets ``grace`` seconds to finish before it counts.
    """
    deadline = time.monotonic() + grace
    while True:
        parents = descendants(root)
        commands = {pid: _command(pid) for pid in parents}
        found = {
            pid: command
            for pid, command in commands.items()
            if not (parents[pid] == root and any(h in command for h in OWN_HELPERS))
        }
        if all(found.values()) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def stop_all(pids: list[int]) -> None:
    """SIGKILL ``pids`` and reap those that are this process's children."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
