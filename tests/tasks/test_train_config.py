"""A pipeline run's training config: resumable, checkpointed per run, a sweep child's own."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from components.core import schema
from components.tasks.train_config import pipeline_train_config
from components.training.config import TrainConfig
from components.tuning.grid import combination_key

RECIPE = schema.pick(TrainConfig, asdict(TrainConfig(data="-", output="-", epochs=3)))


def config(**changes) -> TrainConfig:
    arguments = dict(
        arrays="/in",
        output="/out",
        recipe={**RECIPE, "gpus": 2, "tracking_uri": "http://x"},
        checkpoint_root="s3://bucket/ckpt/",
        kfp_run_id="run-9",
        pipeline_name="dogs-vs-cats",
    )
    return pipeline_train_config(**{**arguments, **changes})


def test_a_pipeline_run_always_resumes_its_own_checkpoints():
    cfg = config()
    assert cfg.resume and cfg.epochs == 3 and (cfg.data, cfg.output) == ("/in", "/out")
    assert cfg.checkpoint_uri == "s3://bucket/ckpt/run-9" and cfg.kfp_run_id == "run-9"
    assert config(checkpoint_root="").checkpoint_uri is None


def test_a_sweep_childs_combination_overrides_the_recipe_and_keys_its_checkpoints():
    combination = json.dumps({"epochs": 5, "lr": 0.01})
    cfg = config(combination=combination)
    assert (cfg.epochs, cfg.lr, cfg.combination) == (5, 0.01, combination)
    assert cfg.checkpoint_uri == f"s3://bucket/ckpt/run-9/{combination_key(combination)}"


@pytest.mark.parametrize("field", ["output", "checkpoint_uri", "experiment", "mlflow_run_id"])
def test_a_combination_cannot_set_what_is_not_a_recipe_field(field):
    with pytest.raises(ValueError, match=rf"unknown TrainConfig settings \['{field}'\]"):
        config(combination=json.dumps({field: "/etc"}))
