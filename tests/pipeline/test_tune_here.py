"""``tune --local`` (``pipeline.tune_here``): download, preprocess, search, evaluate, the gate."""

import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from components.core import tracking
from tests.servers import S3_KEYS

pytestmark = [pytest.mark.slow, pytest.mark.integration]


@pytest.fixture
def through_the_server(running_server, monkeypatch, tmp_path):
    """The command logs to the server, as a step without bucket keys does."""
    for key in (*S3_KEYS, "MLFLOW_S3_ENDPOINT_URL", "AWS_ENDPOINT_URL", "MLFLOW_RUN_ID"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", running_server.url)
    return MlflowClient(running_server.url)


def test_tune_local_searches_the_sample_and_sends_the_best_to_the_gate(
    through_the_server, sample_zip, tmp_path
):
    """The README's command: download, preprocess, two trials, evaluate, the gate."""
    client = through_the_server
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "tune", "--local", "--source", str(sample_zip),
         "--trials", "2", "--workdir", str(tmp_path / "tune"), "--preset", "tutorial",
         "epochs=1", "image_size=32", "min_accuracy=0", "registered_model_name=tuned"],
        capture_output=True, text=True, timeout=600, env=os.environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "registered tuned version 1 as @candidate" in done.stdout
    version = client.get_model_version_by_alias("tuned", "candidate")
    best = client.get_run(version.run_id)
    assert best.data.tags[tracking.TUNE_BEST_TAG] == "true"
    assert "test_accuracy" in best.data.metrics
    assert "compare-runs" in done.stdout
