"""The train step on the real sample, tracked in a real (SQLite) MLflow store."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

import numpy as np
import pytest
import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from components import train
from components.core import schema, tracking
from components.data.arrays import SPLITS, load_split, save_split
from components.training import runtime, session
from components.training.checkpoints import load_checkpoint
from components.training.config import TrainConfig
from components.training.loop import NonFiniteLossError
from components.training.models import load_classifier
from tests.conftest import REPO
from tests.helpers import run_to_end, train_cli
from tests.local_http import LocalHTTPServer

METRICS = {
    "train_loss",
    "train_accuracy",
    "val_loss",
    "val_accuracy",
    "epoch_seconds",
    "images_per_second",
}


def config(sample_arrays, output, **overrides) -> TrainConfig:
    return TrainConfig(data=str(sample_arrays), output=str(output), **overrides)


def test_train_logs_everything_to_mlflow(sample_arrays, tmp_path, mlflow_store):
    result = session.train(
        config(
            sample_arrays,
            tmp_path / "out",
            epochs=2,
            kfp_run_id="kfp-123",
            pipeline_name="dogs-vs-cats",
        )
    )
    client = MlflowClient(mlflow_store)
    run = client.get_run(result.run_id)
    assert run.data.params["model"] == "tutorial_cnn" and run.data.params["epochs"] == "2"
    assert run.data.params["data_train_cat"] == "801" and run.data.params["image_size"] == "40"
    assert run.data.tags["kfp.run_id"] == "kfp-123"
    assert METRICS <= set(run.data.metrics)
    history = client.get_metric_history(result.run_id, "val_accuracy")
    assert [m.step for m in history] == [1, 2]
    assert [a.path for a in client.list_artifacts(result.run_id, "checkpoints")] == [
        "checkpoints/checkpoint.pt"
    ]
    logged = tracking.load_model(result.model_uri)  # pickle refused: it must load without
    assert logged(torch.full((5, 1, 40, 40), 128.0)).shape == (5, 2)
    assert (tmp_path / "out/mlflow_run_id").read_text() == result.run_id
    saved = json.loads((tmp_path / "out/history.json").read_text())
    assert [e["epoch"] for e in saved] == [1, 2] and METRICS <= set(saved[0])


def test_model_dir_rebuilds_the_net_and_its_normalisation(sample_arrays, tmp_path, mlflow_store):
    session.train(config(sample_arrays, tmp_path / "out", epochs=1, dry_run=True))
    model, spec = load_classifier(tmp_path / "out")
    assert spec["model"] == "tutorial_cnn" and spec["channels"] == 1 and spec["image_size"] == 40
    assert spec["mean"] and spec["std"] and spec["classes"] == ["cat", "dog"]
    assert model(torch.zeros(2, 1, 40, 40)).shape == (2, 2)


def test_a_mirror_averaging_model_keeps_it_when_saved_and_logged(
    sample_arrays, tmp_path, mlflow_store
):
    result = session.train(
        config(sample_arrays, tmp_path / "out", epochs=1, dry_run=True, mirror_average=True)
    )
    saved, spec = load_classifier(tmp_path / "out")
    assert spec["mirror_average"] is True
    pixels = torch.randint(0, 256, (3, 1, 40, 40), generator=torch.Generator().manual_seed(0))
    for model in (saved, tracking.load_model(result.model_uri)):
        out, mirrored = model(pixels.float()), model(pixels.flip(3).float())
        assert torch.allclose(out, mirrored, atol=1e-6) and not torch.allclose(out[0], out[1])


def test_resume_from_a_durable_store_after_losing_the_pod(sample_arrays, tmp_path, mlflow_store):
    store = tmp_path / "durable"
    first = session.train(
        config(sample_arrays, tmp_path / "pod1", epochs=1, checkpoint_uri=str(store))
    )
    assert load_checkpoint(store / "checkpoint.pt")["epoch"] == 1
    resumed = session.train(
        config(sample_arrays, tmp_path / "pod2", epochs=2, resume=True, checkpoint_uri=str(store))
    )
    assert resumed.run_id == first.run_id
    assert resumed.history[0] == first.history[0] and len(resumed.history) == 2
    steps = [
        m.step for m in MlflowClient(mlflow_store).get_metric_history(first.run_id, "val_loss")
    ]
    assert steps == [1, 2]


def test_resume_finds_the_checkpoint_in_the_kfp_runs_mlflow_run(
    sample_arrays, tmp_path, mlflow_store
):
    first = session.train(config(sample_arrays, tmp_path / "pod1", epochs=1, kfp_run_id="run-7"))
    resumed = session.train(
        config(sample_arrays, tmp_path / "pod2", epochs=2, resume=True, kfp_run_id="run-7")
    )
    assert resumed.run_id == first.run_id and [e["epoch"] for e in resumed.history] == [1, 2]


def test_resume_refuses_a_checkpoint_of_another_model(sample_arrays, tmp_path, mlflow_store):
    session.train(config(sample_arrays, tmp_path / "out", epochs=1, dry_run=True))
    with pytest.raises(ValueError, match="checkpoint has model='tutorial_cnn'"):
        session.train(config(sample_arrays, tmp_path / "out", model="bn_cnn", resume=True))


def test_an_unreadable_checkpoint_stops_the_resume_and_is_kept(
    sample_arrays, tmp_path, mlflow_store
):
    store = tmp_path / "durable"
    session.train(config(sample_arrays, tmp_path / "pod1", dry_run=True, checkpoint_uri=str(store)))
    truncated = (store / "checkpoint.pt").read_bytes()[:2000]
    (store / "checkpoint.pt").write_bytes(truncated)
    with pytest.raises(ValueError, match=f"cannot load {store}/checkpoint.pt, a checkpoint"):
        session.train(
            config(sample_arrays, tmp_path / "pod2", resume=True, checkpoint_uri=str(store))
        )
    assert (store / "checkpoint.pt").read_bytes() == truncated  # evidence, not overwritten


def test_a_checkpoint_whose_state_does_not_fit_the_net_is_a_clear_error(
    sample_arrays, tmp_path, mlflow_store
):
    session.train(config(sample_arrays, tmp_path / "out", dry_run=True))
    state = load_checkpoint(tmp_path / "out/checkpoint.pt")
    state["model"]["net.fc1.weight"] = state["model"]["net.fc1.weight"][:, :10]
    torch.save(state, tmp_path / "out/checkpoint.pt")
    with pytest.raises(ValueError, match="cannot resume from the checkpoint after epoch 1: its"):
        session.train(config(sample_arrays, tmp_path / "out", resume=True))


def test_resume_refuses_a_checkpoint_trained_on_images_of_another_size(
    small_arrays, tmp_path, mlflow_store
):
    session.train(config(small_arrays, tmp_path / "out", model="compact_cnn", dry_run=True))
    larger = tmp_path / "larger"  # the same photos padded to 48×48: global pooling takes them
    larger.mkdir()
    for split in SPLITS:
        images, labels = load_split(small_arrays, split)
        save_split(larger, split, np.pad(images, ((0, 0), (0, 0), (4, 4), (4, 4))), labels)
    meta = json.loads((small_arrays / "meta.json").read_text())
    (larger / "meta.json").write_text(json.dumps({**meta, "image_size": 48}))
    with pytest.raises(ValueError, match=r"images of channels × side \[1, 40\], the arrays"):
        session.train(config(larger, tmp_path / "out", model="compact_cnn", resume=True))


def test_a_non_finite_loss_stops_training_and_keeps_the_last_good_outputs(
    small_arrays, tmp_path, mlflow_store
):
    out = tmp_path / "out"
    session.train(config(small_arrays, out, epochs=1))
    good_model, good_checkpoint = (
        (out / "model.pt").read_bytes(),
        (out / "checkpoint.pt").read_bytes(),
    )
    # (a resumed run would take the checkpoint's learning rate: start again instead)
    with pytest.raises(NonFiniteLossError, match="epoch 1: expected finite losses"):
        session.train(config(small_arrays, out, epochs=1, lr=1e30))
    assert (out / "model.pt").read_bytes() == good_model
    assert (out / "checkpoint.pt").read_bytes() == good_checkpoint


def test_a_kfp_retry_of_a_run_that_diverged_stops_before_training(
    small_arrays, tmp_path, mlflow_store
):
    diverging = dict(epochs=1, lr=1e30, resume=True)  # as the pipeline runs it: resume=True
    with pytest.raises(NonFiniteLossError, match="epoch 1"):
        session.train(config(small_arrays, tmp_path / "pod1", kfp_run_id="kfp-nan", **diverging))
    run_id = tracking.find_run_by_tags("dogs-vs-cats", {tracking.KFP_RUN_ID_TAG: "kfp-nan"})
    assert "expected finite losses" in tracking.run_tag(run_id, tracking.DIVERGED_TAG)

    # KFP retries the task in a new pod: it fails at once, naming the earlier attempt
    with pytest.raises(NonFiniteLossError, match="not retrying: an earlier attempt of KFP run"):
        session.train(config(small_arrays, tmp_path / "pod2", kfp_run_id="kfp-nan", **diverging))
    # another KFP run, with its own MLflow run, trains (and diverges) on its own
    with pytest.raises(NonFiniteLossError, match="epoch 1: expected finite losses"):
        session.train(config(small_arrays, tmp_path / "pod3", kfp_run_id="kfp-other", **diverging))


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"model": "vgg"}, "expected one of: tutorial_cnn, compact_cnn, bn_cnn, resnet18"),
        ({"schedule": "cosine"}, "expected one of: constant, onecycle"),
        ({"epochs": 0}, "expected epochs >= 1"),
        ({"lr": float("inf")}, "a finite lr > 0"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(data="d", output="o", **overrides)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="use --device auto or cpu"):
        runtime.pick_device("cuda")


@pytest.mark.slow
def test_killed_and_resumed_run_ends_with_the_same_weights(small_arrays, tmp_path, mlflow_store):
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_store}
    common = [
        "--data",
        str(small_arrays),
        "--epochs",
        "4",
        "--model",
        "compact_cnn",
        "--batch-size",
        "64",
        "--schedule",
        "onecycle",
    ]
    run_to_end([*common, "--output", str(tmp_path / "whole")], env, tmp_path)

    victim = subprocess.Popen(
        train_cli([*common, "--output", str(tmp_path / "killed")]),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    checkpoint = tmp_path / "killed/checkpoint.pt"
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert load_checkpoint(checkpoint)["epoch"] < 4, "the run finished before it could be killed"

    run_to_end([*common, "--output", str(tmp_path / "killed"), "--resume"], env, tmp_path)
    expected = torch.load(tmp_path / "whole/model.pt", weights_only=True)["state_dict"]
    actual = torch.load(tmp_path / "killed/model.pt", weights_only=True)["state_dict"]
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[k], actual[k]) for k in expected)
    runs = {(tmp_path / d / "mlflow_run_id").read_text() for d in ("whole", "killed")}
    assert len(runs) == 2  # the resumed run continued its own MLflow run, not a new one
    killed_run = (tmp_path / "killed/mlflow_run_id").read_text()
    steps = {m.step for m in MlflowClient(mlflow_store).get_metric_history(killed_run, "val_loss")}
    assert steps == {1, 2, 3, 4}


def test_preset_sets_defaults_that_explicit_flags_override():
    cfg = train.parse_config(
        ["--data", "d", "--output", "o", "--preset", "accurate", "--epochs", "3"]
    )
    assert (cfg.model, cfg.schedule, cfg.batch_size) == ("resnet18", "onecycle", 256)
    assert cfg.epochs == 3
    assert train.parse_config(["--data", "d", "--output", "o"]).model == "tutorial_cnn"


def test_config_survives_the_trip_through_a_command_line():
    cfg = TrainConfig(
        data="d",
        output="o",
        model="bn_cnn",
        augment=False,
        resume=True,
        checkpoint_uri="s3://bucket/ckpt",
        lr=0.01,
    )
    assert train.parse_config(schema.to_argv(cfg)) == cfg


def test_an_injected_mlflow_run_is_used_rather_than_a_new_one(
    sample_arrays, tmp_path, mlflow_store, monkeypatch
):
    client = MlflowClient(mlflow_store)
    experiment = client.create_experiment("dogs-vs-cats")
    injected = client.create_run(experiment).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", injected)  # as KFP's MLflow integration does
    result = session.train(config(sample_arrays, tmp_path / "out", epochs=1, dry_run=True))
    assert result.run_id == injected
    assert client.get_run(injected).data.params["model"] == "tutorial_cnn"
    assert len(client.search_runs([experiment])) == 1


def test_checkpoints_survive_the_pod_in_s3(sample_arrays, tmp_path, mlflow_store, monkeypatch):
    import boto3

    from tests.servers import S3_KEYS, S3Server

    for key, value in S3_KEYS.items():
        monkeypatch.setenv(key, value)
    with S3Server() as s3:
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
        boto3.client("s3").create_bucket(Bucket="checkpoints")
        uri = "s3://checkpoints/kfp-run-9"
        first = session.train(
            config(sample_arrays, tmp_path / "pod1", epochs=1, checkpoint_uri=uri)
        )
        keys = [
            o["Key"] for o in boto3.client("s3").list_objects_v2(Bucket="checkpoints")["Contents"]
        ]
        assert keys == ["kfp-run-9/checkpoint.pt"]
        resumed = session.train(
            config(sample_arrays, tmp_path / "pod2", epochs=2, resume=True, checkpoint_uri=uri)
        )
    assert resumed.run_id == first.run_id and [e["epoch"] for e in resumed.history] == [1, 2]


@pytest.mark.slow
def test_the_accurate_preset_runs_end_to_end(sample_images, tmp_path, mlflow_store):
    from components import preprocess

    preprocess.main(
        [
            "--input",
            str(sample_images),
            "--output",
            str(tmp_path / "rgb"),
            "--preset",
            "accurate",
            "--workers",
            "2",
        ]
    )
    cfg = train.parse_config(
        [
            "--data",
            str(tmp_path / "rgb"),
            "--output",
            str(tmp_path / "m"),
            "--preset",
            "accurate",
            "--dry-run",
        ]
    )
    result = session.train(cfg)
    run = MlflowClient(mlflow_store).get_run(result.run_id)
    assert run.data.params["model"] == "resnet18" and run.data.params["image_size"] == "128"
    assert run.data.params["channels"] == "3" and len(result.history) == 1
    assert run.data.params["min_crop_area"] == "0.25" and run.data.params["epochs"] == "100"


def test_a_bad_label_fails_before_any_mlflow_run_is_created(small_arrays, tmp_path, mlflow_store):
    data = tmp_path / "data"
    shutil.copytree(small_arrays, data)
    labels = np.load(data / "val_labels.npy")
    labels[7] = -1
    np.save(data / "val_labels.npy", labels, allow_pickle=False)
    with pytest.raises(ValueError, match="expected labels 0 \\(cat\\) or 1 \\(dog\\) in val"):
        session.train(config(data, tmp_path / "out", epochs=1))
    assert MlflowClient(mlflow_store).search_runs(experiment_ids=["0", "1"]) == []


class HangingTrackingApi(LocalHTTPServer):
    """An MLflow server stand-in whose /health answers and whose API never does in time."""

    def __init__(self):
        self._bind()

    def _handler(self):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                if self.path == "/health":
                    self.send_response(200)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"OK")
                    return
                time.sleep(3)

            do_POST = do_GET

        return Handler


def test_a_tracking_api_that_hangs_fails_training_in_bounded_time(
    small_arrays, tmp_path, monkeypatch
):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "1")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    started = time.monotonic()
    with HangingTrackingApi() as server:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", server.base_url)
        with pytest.raises(MlflowException, match="timed out"):
            session.train(config(small_arrays, tmp_path / "out", epochs=1))
    assert time.monotonic() - started < 20
    assert not (tmp_path / "out/model.pt").exists()


def test_mlflow_http_calls_are_bounded_unless_the_user_says_otherwise():
    def limits(**env):
        base = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_")}
        code = (
            "import os, components.core.tracking; "
            "print(os.environ['MLFLOW_HTTP_REQUEST_TIMEOUT'], "
            "os.environ['MLFLOW_HTTP_REQUEST_MAX_RETRIES'])"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO,
            env={**base, **env},
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        )
        return done.stdout.split()

    assert limits() == ["30", "5"]
    assert limits(MLFLOW_HTTP_REQUEST_TIMEOUT="300") == ["300", "5"]


def test_a_folder_the_train_step_did_not_write_is_refused_and_kept(small_arrays, tmp_path):
    users = tmp_path / "my-models"
    users.mkdir()
    (users / "model.pt").write_bytes(b"someone's model")
    (users / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="not written by the train step"):
        session.train(config(small_arrays, users, epochs=1))
    assert (users / "model.pt").read_bytes() == b"someone's model"
    assert sorted(p.name for p in users.iterdir()) == ["model.pt", "notes.txt"]


def test_a_killed_runs_temporary_files_do_not_block_the_next_run(
    small_arrays, tmp_path, mlflow_store
):
    out = tmp_path / "out"
    session.train(config(small_arrays, out, epochs=1, dry_run=True))
    (out / ".checkpoint.pt.x1y2z3.tmp").write_bytes(b"half a checkpoint")
    session.train(config(small_arrays, out, epochs=1, dry_run=True))
    assert not list(out.glob(".checkpoint.pt.*.tmp"))
    (out / "stray.txt").write_text("not the step's")
    with pytest.raises(FileExistsError, match="stray.txt"):
        session.train(config(small_arrays, out, epochs=1, dry_run=True))
