"""Real servers for the integration tests: an MLflow tracking server process, moto's S3."""

from __future__ import annotations

import os
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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


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
    """``mlflow server`` as its own process: SQLite store, artifacts proxied to S3."""

    def __init__(self, workdir: Path, s3_endpoint: str, bucket: str, port: int | None = None):
        self.port = port or free_port()
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
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{workdir / 'mlflow.db'}",
            "--serve-artifacts",
            "--artifacts-destination",
            f"s3://{bucket}",
            "--allowed-hosts",
            "127.0.0.1:*,localhost:*,mlflow.mlflow.svc.cluster.local:*",
        ]
        self.env = {**os.environ, **S3_KEYS, "MLFLOW_S3_ENDPOINT_URL": s3_endpoint}
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 90) -> MlflowServer:
        log = open(self.workdir / "mlflow-server.log", "ab")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(
            self.command,
            env=self.env,
            stdout=log,
            stderr=log,
            cwd=self.workdir,
            start_new_session=True,
        )
        self._log = log
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"mlflow server exited: {self.log_tail()}")
            try:
                if requests.get(f"{self.url}/health", timeout=2).ok:
                    return self
            except requests.ConnectionError:
                time.sleep(0.3)
        raise TimeoutError(f"mlflow server not healthy after {timeout}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait()
        if self.process:
            self._log.close()

    def log_tail(self) -> str:
        return (self.workdir / "mlflow-server.log").read_text()[-3000:]

    def __enter__(self) -> MlflowServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
