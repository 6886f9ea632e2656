"""The train step's schema: refused values, the trip through a command line, presets."""

from __future__ import annotations

import pytest

from components import train
from components.core import schema
from components.training.config import TrainConfig


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
