"""The training components: each recipe field an input of its own type, and a body hands
exactly those inputs on as the recipe (``pick(TrainConfig, locals())``).

A train body run end to end, with evaluate and register after it: tests/pipeline/test_ops.py.
"""

from __future__ import annotations

import pytest
from kfp.dsl import Dataset, Model

from components.core import schema
from components.training.config import TrainConfig
from components.tuning.config import TuneConfig
from pipeline import train_ops
from tests.support.kfp_components import KFP_TYPES, parameter_inputs, train_inputs

TRAIN_OPS = [
    (train_ops.train_op, (TrainConfig,)),
    (train_ops.trainjob_op, (TrainConfig,)),
    (train_ops.tune_op, (TrainConfig, TuneConfig)),
]


@pytest.mark.parametrize(("op", "steps"), TRAIN_OPS, ids=lambda x: getattr(x, "name", ""))
def test_each_recipe_field_is_an_input_of_its_own_type(op, steps):
    inputs = parameter_inputs(op)
    for step in steps:
        for field in schema.fields_of(step, *schema.PIPELINE_ROLES):
            kind = schema.field_type(step, field)
            assert inputs.get(field.name) == KFP_TYPES[kind], f"{op.name}: {field.name}"


class Handed(Exception):
    """What a body handed to ``pipeline_train_config``, raised to stop it there."""


@pytest.mark.parametrize("op", [op for op, _ in TRAIN_OPS], ids=lambda op: op.name)
def test_a_body_hands_on_each_recipe_input_as_given(op, monkeypatch, tmp_path):
    def handed(**kwargs):
        raise Handed(kwargs["recipe"])

    monkeypatch.setattr("components.tasks.train_config.pipeline_train_config", handed)
    given = train_inputs(model="bn_cnn", lr=0.0123, label_smoothing=0.05, compile=True, seed=7)
    others = {
        name: {int: 1, str: "x", float: 0.5, bool: False}[kind]
        for name, kind in parameter_inputs_types(op).items()
        if name not in given
    }
    with pytest.raises(Handed) as stopped:
        op.python_func(
            arrays=Dataset(name="arrays", uri=str(tmp_path / "arrays"), metadata={}),
            trained_model=Model(name="model", uri=str(tmp_path / "model"), metadata={}),
            **{**others, "tracking_uri": f"sqlite:///{tmp_path / 'mlflow.db'}"},
            **given,
        )
    assert stopped.value.args[0] == given


def parameter_inputs_types(op) -> dict[str, type]:
    """The component's parameter inputs by name, each as a Python type."""
    python = {kfp: kind for kind, kfp in KFP_TYPES.items()}
    return {name: python[kind] for name, kind in parameter_inputs(op).items()}
