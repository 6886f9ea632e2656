"""The tests' own servers and process sweep: nothing they start outlives them."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support import processes
from tests.support.servers import MlflowServer, has_mapped, process_group_members


def test_a_server_that_misses_its_deadline_is_stopped_with_its_whole_group(tmp_path):
    server = MlflowServer(tmp_path, "http://127.0.0.1:9", "bucket")
    with pytest.raises(TimeoutError, match="not healthy after 0.5s"):
        server.start(timeout=0.5)
    assert server.process.returncode is not None
    assert process_group_members(server.process.pid) == []


def test_an_orphaned_grandchild_is_found_and_stopped():
    # a child that starts a sleeper in a new session, then exits: the sleeper is orphaned
    spawn = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], "
        "start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
        "print(p.pid)"
    )
    done = subprocess.run([sys.executable, "-c", spawn], capture_output=True, text=True, check=True)
    orphan = int(done.stdout)
    try:
        assert orphan in processes.leftovers(os.getpid())  # adopted by pytest, the subreaper
    finally:
        processes.stop_all([orphan])
    deadline = time.monotonic() + 10
    while orphan in processes.descendants(os.getpid()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert orphan not in processes.leftovers(os.getpid())


def test_a_process_already_exiting_is_given_time_before_it_counts(monkeypatch):
    exited_at = time.monotonic() + 0.5
    pid = 4242

    def found(root):  # a worker whose command line is gone, gone itself half a second later
        return {pid: root} if time.monotonic() < exited_at else {}

    monkeypatch.setattr(processes, "descendants", found)
    monkeypatch.setattr(processes, "_command", lambda _: "")
    assert processes.leftovers(1, grace=5) == {}
    exited_at = time.monotonic() + 60  # one that does not finish exiting is reported
    assert processes.leftovers(1, grace=0.3) == {pid: ""}


def test_a_library_is_seen_mapped_where_it_is_loaded():
    """The check the model server's tests make that it runs without torch: this process
    has torch loaded, and no library of a made-up name."""
    import torch  # noqa: F401

    assert has_mapped(os.getpid(), "libtorch_cpu")
    assert not has_mapped(os.getpid(), "libno-such-library")
