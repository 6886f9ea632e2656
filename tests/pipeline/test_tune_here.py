"""``tune --local`` (``pipeline.tune_here``): download, preprocess, search, evaluate, the gate."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from components.tracking.tags import BEST_TAG, PARENT_TAG, SEARCH_TAG, STOPPED_EARLY_TAG
from pipeline.__main__ import main as pipeline_main
from tests.support.processes import HANG_SECONDS
from tests.support.readme import readme_command

pytestmark = [pytest.mark.slow, pytest.mark.integration]


# one trial each, the preset's own values enqueued: eight epochs at its learning rate,
# against one epoch at the space's lowest (a net that has barely moved: chance)
STRONG = ["epochs=8", "--enqueue", "lr=0.006,weight_decay=0.05,label_smoothing=0.1,"
          "min_crop_area=1.0,batch_size=64"]  # fmt: skip
WEAK = ["epochs=1", "--enqueue", "lr=0.001,weight_decay=0.05,label_smoothing=0.1,"
        "min_crop_area=1.0,batch_size=64"]  # fmt: skip


def tune_here_arguments(sample, workdir, *settings: str) -> list[str]:
    return [
        *("tune", "--local", "--source", str(sample), "--trials", "1"),
        *("--workdir", str(workdir), "--preset", "tutorial", "image_size=32", "min_accuracy=0"),
        *("registered_model_name=tuned", *settings),
    ]


def test_a_worse_model_from_tune_local_leaves_candidate_on_the_better_one(
    tracking_server, small_sample_zip, tmp_path, capsys
):
    """Through a team's tracking server (PostgreSQL, SeaweedFS): a search registers the
    better model, a second search a worse one on the same test split; @candidate stays,
    and the second says why with both figures. (Both run the command in this process;
    the README's test runs it as a process of its own.)"""
    client = MlflowClient(tracking_server.url)
    pipeline_main(tune_here_arguments(small_sample_zip, tmp_path, *STRONG))
    better = capsys.readouterr().out
    assert "registered tuned version 1 as @candidate" in better
    champion = client.get_model_version_by_alias("tuned", "candidate")
    best = client.get_run(champion.run_id)
    assert best.data.tags[BEST_TAG] == "true"
    assert "compare-runs" in better
    pipeline_main(tune_here_arguments(small_sample_zip, tmp_path, *WEAK))
    worse = capsys.readouterr().out
    theirs, ours = best.data.metrics["test_accuracy"], accuracy_of(worse)
    assert ours < theirs
    assert (f"registered tuned version 2 without @candidate: test accuracy {ours:.4f} on ") in worse
    again = (
        r"on the same \d+ test photos \(of test photos sha256 [0-9a-f]{12}…\), "
        "which neither trained on, version 1 scored again on them"
    )
    assert re.search(
        rf">= minimum 0\.0000; does not beat version 1's {theirs:.4f} {again}; @candidate stays "
        "on version 1",
        worse,
    ), worse
    assert client.get_model_version_by_alias("tuned", "candidate").run_id == champion.run_id
    assert "next:          @candidate stays on the better version" in worse


def accuracy_of(summary: str) -> float:
    (line,) = [line for line in summary.splitlines() if line.startswith("best trial:")]
    return float(line.rpartition("test accuracy ")[2].rstrip(")"))


def test_the_readmes_tune_local_command_records_the_search_in_the_default_store(
    small_sample_zip, tmp_path, monkeypatch
):
    """README, as typed (the sample's path aside, read from the README itself), with no
    tracking URI set: the store every local command shares, ``runs/mlflow.db``."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    typed = readme_command("Compare recipes, search them", "python -m pipeline tune --local")
    trials = int(re.search(r"--trials (\d+)", typed)[1])
    command = typed.replace("tests/fixtures/petimages-sample.zip", str(small_sample_zip))
    assert command != typed
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", command],
        capture_output=True, text=True, timeout=HANG_SECONDS, env=os.environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    client = MlflowClient(f"sqlite:///{tmp_path / 'runs/mlflow.db'}")
    (parent,) = client.search_runs(["1"], f"tags.`{SEARCH_TAG}` = 'optuna'")
    children = client.search_runs(["1"], f"tags.`{PARENT_TAG}` = '{parent.info.run_id}'")
    assert len(children) == trials
    stopped = [c for c in children if c.data.tags.get(STOPPED_EARLY_TAG) == "true"]
    assert all(c.info.status == "KILLED" for c in stopped)
    assert parent.data.metrics["trials_stopped_early"] == len(stopped)
    (best,) = [c for c in children if c.data.tags.get(BEST_TAG) == "true"]
    assert parent.data.tags["search.best_run_id"] == best.info.run_id
    assert f"search run:    {parent.info.run_id}" in done.stdout
    store = f"sqlite:///{tmp_path / 'runs/mlflow.db'}"
    assert f"MLflow UI:     mlflow ui --backend-store-uri {store}" in done.stdout
    assert "\nnext:          " in done.stdout  # what to serve, or how to pass the gate
    # a line a trial and an epoch on the terminal, as run prints a line a task; the rest
    # (the download's, preprocess's, MLflow's and Optuna's INFO lines) in the log it names
    shown = done.stderr.splitlines()
    assert len([line for line in shown if re.match(r"  trial \S+ started: lr=", line)]) == trials
    assert not [line for line in shown if " INFO " in line or line.startswith("[I ")], shown
    log = Path(re.search(r"full log: (\S+)", done.stdout)[1])
    assert "components.preprocessing.plan: found" in log.read_text()
    if "registered dogs-vs-cats version 1" in done.stdout:  # the gate's own word decides
        assert client.get_model_version_by_alias("dogs-vs-cats", "candidate").run_id == (
            best.info.run_id
        )
    else:
        assert "not registered" in done.stdout and not client.search_registered_models()


@pytest.mark.parametrize("value", ["5", "-1"])
def test_an_enqueued_value_outside_the_space_is_refused_before_any_download(value, tmp_path):
    (tmp_path / "photos.zip").write_bytes(b"PK")  # there, and never opened
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "tune", "--local", "--source", "photos.zip",
         "--workdir", str(tmp_path / "w"), "--enqueue", f"lr={value}"],
        capture_output=True, text=True, timeout=HANG_SECONDS, env=os.environ, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "w").exists()
    assert "expected lr in the searched space (0.001 to 0.01) in --enqueue" in done.stderr
