"""Real servers for the integration tests: an MLflow tracking server process, moto's S3.

Every process started here runs in its own process group and is stopped with that whole
group, whatever happens during start-up: no server outlives the test that started it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests
from moto.server import ThreadedMotoServer

S3_KEYS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# the tests need no MLflow jobs (its huey consumers are 3+ more processes per server)
QUIET_SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def stop_process_group(process: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGTERM ``process``'s whole group, SIGKILL it after ``grace`` seconds; reap the leader."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 30.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # the leader is gone; children that ignored SIGTERM go with SIGKILL
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        return


class S3Server:
    """moto's S3 API on 127.0.0.1, in a thread of this process."""

    def __enter__(self) -> S3Server:
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self._server.stop()


class MlflowServer:
    """``mlflow server`` as its own process group, artifacts proxied to S3.

    ``backend_store_uri`` defaults to a SQLite file in ``workdir``; ``extra_args`` and
    ``extra_env`` carry a deployment's own flags and settings.
    """

    def __init__(
        self,
        workdir: Path,
        s3_endpoint: str,
        bucket: str,
        *,
        backend_store_uri: str | None = None,
        extra_args: tuple[str, ...] = ("--workers", "1"),
        extra_env: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        self.command = [
            sys.executable,
            "-m",
            "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--backend-store-uri",
            backend_store_uri or f"sqlite:///{workdir / 'mlflow.db'}",
            "--serve-artifacts",
            "--artifacts-destination",
            f"s3://{bucket}",
            "--allowed-hosts",
            "127.0.0.1:*,localhost:*,mlflow.mlflow.svc.cluster.local:*",
            *extra_args,
        ]
        self.env = {
            **os.environ,
            **S3_KEYS,
            **QUIET_SERVER_ENV,
            "MLFLOW_S3_ENDPOINT_URL": s3_endpoint,
            **(extra_env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 120) -> MlflowServer:
        """Start the server and wait until it answers; on any failure, stop it and raise."""
        with open(self.workdir / "mlflow-server.log", "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                stdout=log,
                stderr=log,
                cwd=self.workdir,
                start_new_session=True,
            )
        try:
            self._wait_until_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_until_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last_error = "no answer yet"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {self.log_tail()}")
            try:
                if requests.get(f"{self.url}/health", timeout=5).ok:
                    return
            except requests.RequestException as err:  # refused, reset, read timeout, …
                last_error = repr(err)
            time.sleep(0.3)
        raise TimeoutError(
            f"mlflow server not healthy after {timeout}s ({last_error}): {self.log_tail()}"
        )

    def stop(self) -> None:
        if self.process:
            stop_process_group(self.process)

    def pids(self) -> set[int]:
        """The server's process group: the leader and every worker it started."""
        return set(process_group_members(self.process.pid))

    def log_tail(self) -> str:
        return (self.workdir / "mlflow-server.log").read_text(errors="replace")[-3000:]

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def process_group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, read from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            state, group = fields[0], int(fields[2])
            if group == pgid and state != "Z":
                members.append(int(entry.name))
    return members
