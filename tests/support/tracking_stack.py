"""The tracking server as the cluster runs it, for any test module that needs one: a real
``mlflow server`` with the deployment's flags on PostgreSQL, artifacts proxied into
SeaweedFS's S3 (the store Kubeflow Pipelines installs). One set per test process that
needs one: its start-up is the slow part, so under pytest-xdist the tests that use it run
in one worker (``tests/conftest.py``), and the modules that use it register models under
names of their own."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.servers import S3_KEYS, MlflowServer, PostgresServer, SeaweedS3, deployment_flags

BUCKET = "mlflow-artifacts"
# what a step's pod does not hold: the server proxies artifacts into the bucket
BUCKET_KEYS = (*S3_KEYS, "MLFLOW_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL", "MLFLOW_RUN_ID")


@pytest.fixture(scope="session")
def s3():
    with artifact_store() as server:
        yield server


@pytest.fixture(scope="session")
def postgres():
    """A real PostgreSQL, as the cluster's tracking server uses; None where none runs."""
    with database() as running:
        yield running


@contextlib.contextmanager
def artifact_store() -> Iterator[SeaweedS3]:
    """SeaweedFS's S3 with the tracking server's bucket."""
    with SeaweedS3() as server:
        server.client().create_bucket(Bucket=BUCKET)
        yield server


@contextlib.contextmanager
def database() -> Iterator[PostgresServer | None]:
    """A PostgreSQL of its own; None where none runs."""
    if PostgresServer.missing():
        yield None
        return
    with PostgresServer() as running:
        yield running


@pytest.fixture(scope="session")
def running_server(s3, postgres, tmp_path_factory):
    """The tracking server, started with the deployment's own flags and environment on
    PostgreSQL; on SQLite where no PostgreSQL runs."""
    flags, env = server_flags(postgres)
    workdir = tmp_path_factory.mktemp("mlflow")
    with MlflowServer(workdir, s3.endpoint, BUCKET, flags=flags, env=env) as running:
        yield running


def server_flags(postgres) -> tuple[list[str] | None, dict | None]:
    """The deployment's flags and environment on ``postgres``; (None, None) without one:
    MlflowServer's SQLite defaults."""
    if not postgres:
        return None, None
    secrets = {
        "DB_USER": postgres.USER,
        "DB_PASSWORD": postgres.PASSWORD,
        "ARTIFACTS_DESTINATION": f"s3://{BUCKET}",
    }
    return deployment_flags(secrets, database_host=f"127.0.0.1:{postgres.port}")


@pytest.fixture
def tracking_server(running_server, tmp_path, monkeypatch):
    """The server, with this process and the commands it starts pointed at it as a step
    is (no bucket keys of their own), working in ``tmp_path``."""
    for key in BUCKET_KEYS:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", running_server.url)
    monkeypatch.chdir(tmp_path)
    return running_server


def register_trained_model(
    tracking_url: str, arrays: Path, workdir: Path, name: str, **recipe: object
) -> str:
    """Train one batch on ``arrays`` through the server, as a step without bucket keys
    does (with the settings ``recipe`` gives), and register the model as ``name`` version
    1 @candidate; the run's id. A ``name`` the server holds already (a module's fixture
    made again in this process) is deleted first."""
    from mlflow.exceptions import MlflowException
    from mlflow.tracking import MlflowClient

    from components.tracking import logged_models, registry
    from components.training import session
    from components.training.config import TrainConfig

    with pytest.MonkeyPatch.context() as patch:
        for key in BUCKET_KEYS:
            patch.delenv(key, raising=False)
        patch.setenv("MLFLOW_TRACKING_URI", tracking_url)
        patch.chdir(workdir)
        result = session.train(
            TrainConfig(data=str(arrays), output=str(workdir / "model"), dry_run=True, **recipe)
        )
        model_id = logged_models.logged_model_id(result.run_id)
        with contextlib.suppress(MlflowException):  # not there: nothing to delete
            MlflowClient(tracking_url).delete_registered_model(name)
        version = registry.register_model(model_id, name, "candidate", "a test model", {})
        assert version == "1"
    return result.run_id
