"""``tune --local`` (``pipeline.tune_here``): download, preprocess, search, evaluate, the gate."""

import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from components.core import tracking
from tests.processes import HANG_SECONDS

pytestmark = [pytest.mark.slow, pytest.mark.integration]


def test_tune_local_searches_the_sample_and_sends_the_best_to_the_gate(
    tracking_server, small_sample_zip, tmp_path
):
    """Through a team's tracking server (PostgreSQL, SeaweedFS): two short trials, then
    evaluate and the gate, the best registered there."""
    client = MlflowClient(tracking_server.url)
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "tune", "--local", "--source", str(small_sample_zip),
         "--trials", "2", "--workdir", str(tmp_path / "tune"), "--preset", "tutorial",
         "epochs=1", "image_size=32", "min_accuracy=0", "registered_model_name=tuned"],
        capture_output=True, text=True, timeout=HANG_SECONDS, env=os.environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "registered tuned version 1 as @candidate" in done.stdout
    version = client.get_model_version_by_alias("tuned", "candidate")
    best = client.get_run(version.run_id)
    assert best.data.tags[tracking.TUNE_BEST_TAG] == "true"
    assert "test_accuracy" in best.data.metrics
    assert "compare-runs" in done.stdout


def test_the_readmes_tune_local_command_records_the_search_in_the_default_store(
    small_sample_zip, tmp_path, monkeypatch
):
    """README, as typed (the sample's path aside), with no tracking URI set: the store
    every local command shares, ``runs/mlflow.db``."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "tune", "--local", "--source", str(small_sample_zip),
         "--trials", "4", "--min-trials-required", "2", "--start-step", "3",
         "--preset", "tutorial", "epochs=4", "min_accuracy=0.6"],
        capture_output=True, text=True, timeout=HANG_SECONDS, env=os.environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'runs/mlflow.db'}")
    (parent,) = client.search_runs(["1"], f"tags.`{tracking.TUNE_PARENT_TAG}` = 'true'")
    children = client.search_runs(["1"], f"tags.`{tracking.PARENT_TAG}` = '{parent.info.run_id}'")
    assert len(children) == 4
    stopped = [c for c in children if c.data.tags.get(tracking.STOPPED_EARLY_TAG) == "true"]
    assert all(c.info.status == "KILLED" for c in stopped)
    assert parent.data.metrics["trials_stopped_early"] == len(stopped)
    (best,) = [c for c in children if c.data.tags.get(tracking.TUNE_BEST_TAG) == "true"]
    assert parent.data.tags["tune.best_run_id"] == best.info.run_id
    assert f"search run:    {parent.info.run_id}" in done.stdout
    if "registered dogs-vs-cats version 1" in done.stdout:  # the gate's own word decides
        assert client.get_model_version_by_alias("dogs-vs-cats", "candidate").run_id == (
            best.info.run_id
        )
    else:
        assert "not registered" in done.stdout and not client.search_registered_models()


@pytest.mark.parametrize("value", ["5", "-1"])
def test_an_enqueued_value_outside_the_space_is_refused_before_any_download(value, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "tune", "--local", "--source", "none.zip",
         "--workdir", str(tmp_path / "w"), "--enqueue", f"lr={value}"],
        capture_output=True, text=True, timeout=HANG_SECONDS, env=os.environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "w").exists()
    assert "expected lr in the searched space (0.001 to 0.01) in --enqueue" in done.stderr
