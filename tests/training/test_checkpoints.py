"""Resuming training from a checkpoint in the MLflow run or a durable store; what is refused."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import time

import mlflow
import numpy as np
import pytest
import torch
from mlflow.tracking import MlflowClient

from components.core import schema
from components.core.identity import ModelIdentityError, sha256_of
from components.core.schema import RECIPE
from components.data.arrays import SPLITS, load_split, save_split
from components.training import checkpoints, session
from components.training.checkpoints import load_checkpoint, serialize
from components.training.config import TrainConfig
from tests.support.helpers import run_to_end, train_cli
from tests.support.helpers import train_config as config
from tests.support.processes import HANG_SECONDS


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
    client = MlflowClient(mlflow_store)
    assert [m.step for m in client.get_metric_history(first.run_id, "val_loss")] == [1, 2]
    run = client.get_run(first.run_id)  # the params stay the first attempt's; a tag says more
    assert run.data.params["epochs"] == "1"
    assert run.data.tags["training.epochs"] == "2 (param epochs=1; resumed after epoch 1)"


def test_resume_of_a_run_that_trained_to_its_end_logs_nothing_new(
    small_arrays, tmp_path, mlflow_store, caplog
):
    first = session.train(config(small_arrays, tmp_path / "m", epochs=1))
    client = MlflowClient(mlflow_store)
    experiment = client.get_run(first.run_id).info.experiment_id
    models = [m.model_id for m in client.search_logged_models([experiment])]
    model_bytes = (tmp_path / "m" / "model.pt").read_bytes()
    for _ in range(2):
        with caplog.at_level("INFO", logger=session.__name__):
            again = session.train(config(small_arrays, tmp_path / "m", epochs=1, resume=True))
        assert (again.run_id, again.model_uri) == (first.run_id, first.model_uri)
    assert [m.model_id for m in client.search_logged_models([experiment])] == models
    assert len(client.get_metric_history(first.run_id, "val_accuracy")) == 1
    assert (tmp_path / "m" / "model.pt").read_bytes() == model_bytes
    assert f"nothing to resume: MLflow run {first.run_id} trained all 1 epochs" in caplog.text


def test_resume_with_no_checkpoint_anywhere_says_it_starts_a_new_run(
    sample_arrays, tmp_path, mlflow_store, caplog
):
    """As after a Ctrl-C before the first epoch ended: nothing to resume, and it says so."""
    cfg = config(sample_arrays, tmp_path / "out", resume=True)
    (tmp_path / "out").mkdir()
    meta = json.loads((sample_arrays / "meta.json").read_text())
    with caplog.at_level("INFO", logger=checkpoints.__name__):
        assert checkpoints.find_checkpoint(cfg, meta) is None
    assert [r.getMessage() for r in caplog.records] == [
        f"--resume found no checkpoint in {tmp_path / 'out'}, the checkpoint store or the "
        "MLflow run: starting a new run at epoch 1"
    ]


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
    run_id = session.train(config(sample_arrays, tmp_path / "out", dry_run=True)).run_id
    state = load_checkpoint(tmp_path / "out/checkpoint.pt")
    state["model"]["net.fc1.weight"] = state["model"]["net.fc1.weight"][:, :10]
    torch.save(state, tmp_path / "out/checkpoint.pt")
    # recorded as the run's own (as a checkpoint of an older net would be): restore refuses it
    (model,) = MlflowClient(mlflow_store).search_logged_models(
        [mlflow.get_run(run_id).info.experiment_id], filter_string="name = 'checkpoint'"
    )
    digest = sha256_of(tmp_path / "out/checkpoint.pt")
    MlflowClient(mlflow_store).set_logged_model_tags(
        model.model_id, {"sha256.checkpoint.pt": digest}
    )
    with pytest.raises(ValueError, match="cannot resume from the checkpoint after epoch 1: its"):
        session.train(config(sample_arrays, tmp_path / "out", resume=True))


def test_resume_refuses_a_checkpoint_trained_on_images_of_another_size(
    small_arrays, tmp_path, mlflow_store
):
    session.train(config(small_arrays, tmp_path / "out", model="compact_cnn", dry_run=True))
    larger = tmp_path / "larger"  # the same photos padded to 48×48: global pooling takes them
    larger.mkdir()
    meta = json.loads((small_arrays / "meta.json").read_text())
    for split in SPLITS:
        images, labels = load_split(small_arrays, split)
        padded = np.pad(images, ((0, 0), (0, 0), (4, 4), (4, 4)))
        meta["shards"][split] = save_split(larger, split, padded, labels)
    (larger / "meta.json").write_text(json.dumps({**meta, "image_size": 48}))
    with pytest.raises(ValueError, match=r"images of channels × side \[1, 40\], the arrays"):
        session.train(config(larger, tmp_path / "out", model="compact_cnn", resume=True))


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
    run_to_end([*common, "--output", str(tmp_path / "whole")])

    victim = subprocess.Popen(
        train_cli([*common, "--output", str(tmp_path / "killed")]),
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    checkpoint = tmp_path / "killed/checkpoint.pt"
    deadline = time.monotonic() + HANG_SECONDS
    while not checkpoint.exists() and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert victim.poll() is None, f"the run ended (status {victim.returncode}) before it was killed"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert load_checkpoint(checkpoint)["epoch"] < 4, "the run finished before it could be killed"

    run_to_end([*common, "--output", str(tmp_path / "killed"), "--resume"])
    expected = torch.load(tmp_path / "whole/model.pt", weights_only=True)["state_dict"]
    actual = torch.load(tmp_path / "killed/model.pt", weights_only=True)["state_dict"]
    assert expected.keys() == actual.keys()
    assert all(torch.equal(expected[k], actual[k]) for k in expected)
    runs = {(tmp_path / d / "mlflow_run_id").read_text() for d in ("whole", "killed")}
    assert len(runs) == 2  # the resumed run continued its own MLflow run, not a new one
    killed_run = (tmp_path / "killed/mlflow_run_id").read_text()
    steps = {m.step for m in MlflowClient(mlflow_store).get_metric_history(killed_run, "val_loss")}
    assert steps == {1, 2, 3, 4}


@pytest.mark.integration
def test_checkpoints_survive_the_pod_in_s3(sample_arrays, tmp_path, mlflow_store, monkeypatch):
    from tests.support.servers import S3_KEYS, SeaweedS3

    for key, value in S3_KEYS.items():
        monkeypatch.setenv(key, value)
    with SeaweedS3() as s3:  # the store a Kubeflow cluster has
        monkeypatch.setenv("AWS_ENDPOINT_URL", s3.endpoint)
        s3.client().create_bucket(Bucket="checkpoints")
        uri = "s3://checkpoints/kfp-run-9"
        first = session.train(
            config(sample_arrays, tmp_path / "pod1", epochs=1, checkpoint_uri=uri)
        )
        assert s3.keys("checkpoints") == ["kfp-run-9/checkpoint.pt"]
        resumed = session.train(
            config(sample_arrays, tmp_path / "pod2", epochs=2, resume=True, checkpoint_uri=uri)
        )
    assert resumed.run_id == first.run_id and [e["epoch"] for e in resumed.history] == [1, 2]


def changed(value):
    """Another valid value of a recipe field's type."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return {"efficientnet_lite0": "resnet18", "constant": "onecycle", "onecycle": "constant"}[
            value
        ]
    if isinstance(value, float):
        return value / 2 if value else 0.1
    return value + 1


@pytest.mark.parametrize("schedule", ["constant", "onecycle"])
def test_resume_refuses_a_change_to_any_recipe_field_the_schema_declares(schedule):
    cfg = TrainConfig(
        data="d", output="o", model="efficientnet_lite0", schedule=schedule, min_crop_area=0.5,
        start_size=16,
    )  # fmt: skip
    meta = {"channels": 3, "image_size": 40}
    state = {"config": dataclasses.asdict(cfg), "data_shape": [3, 40], "epoch": 1}
    checkpoints.check_resumable(state, cfg, meta)  # the same recipe resumes
    for field in schema.fields_of(TrainConfig, RECIPE):
        if field.name == "cached_views":  # valid only without crops: a recipe of its own
            cached = dataclasses.replace(cfg, min_crop_area=1.0, start_size=0, frozen_blocks=2)
            cached_state = {**state, "config": dataclasses.asdict(cached)}
            with pytest.raises(ValueError, match="the checkpoint has cached_views=0"):
                checkpoints.check_resumable(
                    cached_state, dataclasses.replace(cached, cached_views=2), meta
                )
            continue
        other = dataclasses.replace(cfg, **{field.name: changed(getattr(cfg, field.name))})
        if field.name == "epochs" and schedule == "constant":
            checkpoints.check_resumable(state, other, meta)  # a constant schedule extends
            continue
        with pytest.raises(ValueError, match=f"cannot resume: the checkpoint has {field.name}="):
            checkpoints.check_resumable(state, other, meta)
    for compile_or_local in ({"compile": True}, {"device": "cpu"}, {"experiment": "other"}):
        checkpoints.check_resumable(state, dataclasses.replace(cfg, **compile_or_local), meta)


def test_resume_refuses_fewer_epochs_than_the_checkpoint_trained():
    cfg = TrainConfig(data="d", output="o", epochs=4)
    meta = {"channels": 1, "image_size": 40}
    state = {"config": dataclasses.asdict(cfg), "data_shape": [1, 40], "epoch": 4}
    checkpoints.check_resumable(state, cfg, meta)  # as many: only the outputs are written
    with pytest.raises(ValueError, match="checkpoint has 4 epochs trained, this run asks for "):
        checkpoints.check_resumable(state, dataclasses.replace(cfg, epochs=2), meta)


def test_a_checkpoint_from_before_a_recipe_field_existed_resumes_at_its_default():
    cfg = TrainConfig(data="d", output="o")
    saved = dataclasses.asdict(cfg)
    del saved["mirror_average"]  # written before the field was added
    state = {"config": saved, "data_shape": [1, 40], "epoch": 1}
    checkpoints.check_resumable(state, cfg, {"channels": 1, "image_size": 40})
    with pytest.raises(ValueError, match="has mirror_average=False"):
        other = dataclasses.replace(cfg, mirror_average=True)
        checkpoints.check_resumable(state, other, {"channels": 1, "image_size": 40})


def test_a_checkpoint_naming_another_run_is_refused_and_that_run_is_untouched(
    small_arrays, tmp_path, mlflow_store
):
    other = session.train(config(small_arrays, tmp_path / "a", epochs=1))
    own = session.train(config(small_arrays, tmp_path / "b", epochs=1))
    client = MlflowClient(mlflow_store)
    before = client.get_run(other.run_id)
    path = tmp_path / "b" / checkpoints.CHECKPOINT
    state, written = load_checkpoint(path), path.read_bytes()
    for forged, reason in (
        (other.run_id, "which this training did not create"),
        ("0" * 32, "which does not exist"),
    ):
        checkpoints.save_checkpoint(serialize({**state, "mlflow_run_id": forged}), path)
        with pytest.raises(ValueError, match=f"checkpoint names MLflow run '{forged}', {reason}"):
            session.train(config(small_arrays, tmp_path / "b", epochs=3, resume=True))
    after = client.get_run(other.run_id)
    assert after.info.run_name == before.info.run_name and after.data.params == before.data.params
    assert len(client.get_metric_history(other.run_id, "val_accuracy")) == 1
    path.write_bytes(written)
    resumed = session.train(config(small_arrays, tmp_path / "b", epochs=2, resume=True))
    assert resumed.run_id == own.run_id and len(resumed.history) == 2


def test_another_runs_checkpoint_relabelled_as_this_runs_is_refused(
    small_arrays, tmp_path, mlflow_store
):
    """Run B's checkpoint copied into run A's output, its run and seed edited to A's: it
    passes every check of the recipe and the run, but A never recorded its digest."""
    own = session.train(config(small_arrays, tmp_path / "a", epochs=1))
    session.train(config(small_arrays, tmp_path / "b", epochs=1, seed=1))
    state = load_checkpoint(tmp_path / "b" / checkpoints.CHECKPOINT)
    state["config"]["seed"], state["rng"]["seed"] = 0, 0
    relabelled = serialize({**state, "mlflow_run_id": own.run_id})
    checkpoints.save_checkpoint(relabelled, tmp_path / "a" / checkpoints.CHECKPOINT)
    client = MlflowClient(mlflow_store)
    history = client.get_metric_history(own.run_id, "val_accuracy")
    with pytest.raises(
        ModelIdentityError,
        match=f"MLflow run {own.run_id} recorded no checkpoint after epoch 1 with its sha256",
    ):
        session.train(config(small_arrays, tmp_path / "a", epochs=2, resume=True))
    assert client.get_metric_history(own.run_id, "val_accuracy") == history


@pytest.mark.parametrize("odd", ["folder", "fifo", "link to /dev/zero"])
def test_a_checkpoint_that_is_not_a_file_is_refused_before_anything_trains(
    small_arrays, tmp_path, mlflow_store, odd
):
    out = tmp_path / "out"
    session.train(config(small_arrays, out, epochs=1, dry_run=True))
    path = out / checkpoints.CHECKPOINT
    path.unlink()
    if odd == "folder":
        path.mkdir()
    elif odd == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    # a folder is refused with the output, the others as the checkpoint; named either way
    with pytest.raises((ValueError, FileExistsError), match=r"checkpoint\.pt"):
        session.train(config(small_arrays, out, epochs=2, resume=True))
    after = mlflow.search_runs(search_all_experiments=True, output_format="list")
    assert [run.info.run_id for run in after] == [run.info.run_id for run in runs]
    assert len(MlflowClient(mlflow_store).get_metric_history(runs[0].info.run_id, "val_loss")) == 1


def test_a_checkpoint_whose_history_is_not_one_record_an_epoch_is_refused(
    small_arrays, tmp_path, mlflow_store
):
    out = tmp_path / "out"
    session.train(config(small_arrays, out, epochs=1, dry_run=True))
    path = out / checkpoints.CHECKPOINT
    state = load_checkpoint(path)
    checkpoints.save_checkpoint(serialize({**state, "history": [7]}), path)
    with pytest.raises(ValueError, match="one record an epoch"):
        session.train(config(small_arrays, out, epochs=2, resume=True))
    assert (out / "model.pt").is_file()  # the output is kept as it was
