"""Presets: named settings every step and the pipeline read, explicit ones winning."""

from __future__ import annotations

import argparse

import pytest

from components.core import schema
from components.core.presets import PRESETS, apply_preset, preset_values
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from components.training.config import TrainConfig
from pipeline.parameters import PARAMETERS

STEPS = (PreprocessConfig, TrainConfig, RegisterConfig)
PLACEHOLDERS = {  # what each step needs besides its settings
    PreprocessConfig: {"input": "in", "output": "out"},
    TrainConfig: {"data": "in", "output": "out"},
    RegisterConfig: {"mlflow_run_id": "r", "test_accuracy": 0.9},
}


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_value_is_a_pipeline_parameter_a_step_builds_with(name):
    values = preset_values(name)
    assert set(values) <= set(PARAMETERS)
    for step in STEPS:  # each step's share of the preset builds that step's config
        step(**{**PLACEHOLDERS[step], **schema.pick(step, values)})
    assert {k for step in STEPS for k in schema.pick(step, values)} == set(values)


def test_a_preset_sets_a_steps_defaults_and_explicit_flags_win():
    parser = argparse.ArgumentParser()
    schema.add_arguments(parser, TrainConfig)
    argv = ["--data", "d", "--output", "o", "--preset", "accurate", "--epochs", "3"]
    apply_preset(parser, argv, TrainConfig)
    cfg = schema.from_namespace(TrainConfig, parser.parse_args(argv))
    assert (cfg.model, cfg.batch_size, cfg.epochs) == ("efficientnet_lite0", 128, 3)
    assert "min_accuracy" not in vars(parser.parse_args(argv))  # another step's setting


def test_an_unknown_preset_lists_the_known_ones():
    with pytest.raises(ValueError, match="unknown preset 'fastest'; expected one of: tutorial"):
        preset_values("fastest")
