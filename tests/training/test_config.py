"""The train step's schema: refused values, the trip through a command line, presets."""

from __future__ import annotations

import pytest

from components import train
from components.core import schema
from components.training.config import TrainConfig
from pipeline.target import PipelineOnly


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"model": "vgg"}, "expected one of: tutorial_cnn, compact_cnn, five_conv_cnn, bn_cnn, "),
        ({"schedule": "cosine"}, "expected one of: constant, onecycle"),
        ({"epochs": 0}, "expected epochs >= 1"),
        ({"lr": float("inf")}, "a finite lr > 0"),
        ({"start_size": 8}, "expected a start size of 0 or at least 16, found 8"),
        ({"cutmix": 1.5}, "expected a CutMix share from 0 to 1, found 1.5"),
        ({"validate_every": 0}, "expected validate every >= 1 epochs, found 0"),
    ],
)
def test_bad_config_is_a_clear_error(tmp_path, overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainConfig(data="d", output="o", **overrides)


def test_preset_sets_defaults_that_explicit_flags_override():
    cfg = train.parse_config(
        ["--data", "d", "--output", "o", "--preset", "accurate", "--epochs", "3"]
    )
    assert (cfg.model, cfg.schedule, cfg.batch_size) == ("efficientnet_lite0", "onecycle", 128)
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


@pytest.mark.parametrize(
    "uri",
    ["file:///tmp/store", "http://127.0.0.1:9/store", "s3:/bucket-typo/prefix", "s3://Up_Case/x"],
)
def test_a_checkpoint_location_neither_s3_nor_a_folder_is_refused_before_any_work(uri):
    with pytest.raises(ValueError, match="expected checkpoint_uri as s3://BUCKET/PREFIX"):
        TrainConfig(data="d", output="o", checkpoint_uri=uri)
    with pytest.raises(ValueError, match="expected checkpoint_root as s3://BUCKET/PREFIX"):
        PipelineOnly(checkpoint_root=uri)


@pytest.mark.parametrize("uri", ["s3://my-bucket/runs", "s3://bucket", "/mnt/ckpt", "runs/ckpt"])
def test_s3_prefixes_and_folder_paths_are_checkpoint_locations(uri):
    assert TrainConfig(data="d", output="o", checkpoint_uri=uri).checkpoint_uri == uri


@pytest.mark.parametrize("seed", [-1, 2**32, 99999999999999999999])
def test_a_seed_torch_or_numpy_cannot_take_is_refused(seed):
    with pytest.raises(ValueError, match=f"expected seed from 0 to 4294967295, found {seed}"):
        TrainConfig(data="d", output="o", seed=seed)


def test_an_experiment_that_looks_like_a_flag_survives_the_command_line():
    cfg = TrainConfig(data="d", output="o", experiment="--dry-run", lr=0.01)
    argv = schema.to_argv(cfg)
    assert "--experiment=--dry-run" in argv
    assert train.parse_config(argv) == cfg
