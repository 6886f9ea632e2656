"""The catalogue of pretrained backbones: each entry's weights from its own package, shaped
as its family's builder makes the net, and an entry all that adding a backbone takes."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import pytest
import torch
from mlflow.tracking import MlflowClient

from components.networks import pretrained
from components.networks.backbones import BACKBONES
from components.networks.models import build_model
from components.training import session
from components.training.config import TrainConfig
from tests.support.processes import HANG_SECONDS


@pytest.mark.parametrize("name", BACKBONES)
def test_each_weights_file_holds_its_entrys_parameters_in_its_builders_shapes(name):
    backbone = BACKBONES[name]
    data = pretrained.read_checked(backbone, pretrained.weights_path(backbone))
    state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    statistics = ("running_mean", "running_var", "num_batches_tracked")
    learned = sum(t.numel() for key, t in state.items() if not key.endswith(statistics))
    assert learned == backbone.parameters
    net = build_model(name, 3, 64)
    pretrained.load_pretrained(net, name)  # every tensor's shape checked
    assert len(net._blocks) == backbone.blocks


def test_weights_of_another_shape_are_refused_naming_the_table():
    net = build_model("efficientnet_lite2", 3, 64)
    with pytest.raises(ValueError, match="builder's table and the catalogue entry must match"):
        pretrained.load_pretrained(net, "efficientnet_lite0")


@pytest.mark.slow
@pytest.mark.parametrize("name", BACKBONES)
def test_each_backbone_trains_a_few_steps_from_its_own_package(
    name, rgb_arrays, tmp_path, mlflow_store
):
    backbone = BACKBONES[name]
    cfg = TrainConfig(
        data=str(rgb_arrays),
        output=str(tmp_path / "m"),
        model=name,
        frozen_blocks=backbone.blocks,
        dry_run=True,
    )
    result = session.train(cfg)
    params = MlflowClient(mlflow_store).get_run(result.run_id).data.params
    assert params["backbone_package"] == backbone.package
    assert params["backbone_sha256"] == backbone.sha256
    assert params["backbone_input_size"] == str(backbone.input_size)
    assert params["frozen_blocks"] == str(backbone.blocks)


@pytest.mark.slow
def test_a_new_entry_is_all_a_backbone_takes(rgb_arrays, tmp_path):
    """A fake entry (Lite1's package under another name, 21 blocks), added before anything
    else loads: the schema takes it with its own frozen-blocks bound, the model builds, the
    search space is a pretrained net's, the train step trains it and records it."""
    probe = textwrap.dedent(
        f"""
        import dataclasses
        from components.networks import backbones
        backbones.BACKBONES["fake_lite"] = dataclasses.replace(
            backbones.BACKBONES["efficientnet_lite1"], imagenet_top1=1.5
        )
        from components.training.config import MODEL_NAMES, TrainConfig
        from components.training import session
        from components.tuning.search_space import PRETRAINED_SPACE, search_space
        from components.tracking.store import use_tracking_uri
        assert "fake_lite" in MODEL_NAMES
        assert search_space("fake_lite") == PRETRAINED_SPACE
        try:
            TrainConfig(data="-", output="-", model="fake_lite", frozen_blocks=22)
        except ValueError as err:
            print("refused:", err)
        use_tracking_uri("sqlite:///{tmp_path / "mlflow.db"}")
        result = session.train(TrainConfig(
            data={str(rgb_arrays)!r}, output={str(tmp_path / "m")!r}, model="fake_lite",
            frozen_blocks=21, dry_run=True,
        ))
        from mlflow.tracking import MlflowClient
        params = MlflowClient().get_run(result.run_id).data.params
        print("trained:", params["model"], params["backbone_imagenet_top1"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused: expected 0 to 21 frozen blocks for fake_lite" in done.stdout
    assert "trained: fake_lite 1.5" in done.stdout
