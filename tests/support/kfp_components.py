"""What the component tests share: a component's parameter inputs, and a recipe to hand it."""

from __future__ import annotations

from dataclasses import asdict

from kfp.pipeline_spec.pipeline_spec_pb2 import ParameterType

from components.core import schema
from components.training.config import TrainConfig

KFP_TYPES = {
    int: ParameterType.NUMBER_INTEGER,
    float: ParameterType.NUMBER_DOUBLE,
    str: ParameterType.STRING,
    bool: ParameterType.BOOLEAN,
}


def parameter_inputs(op) -> dict[str, int]:
    """The component's parameter inputs by name, each with its KFP type."""
    inputs = op.pipeline_spec.root.input_definitions.parameters
    return {name: spec.parameter_type for name, spec in inputs.items()}


def train_inputs(**changes) -> dict:
    """The train step's recipe inputs at their defaults (one epoch), with ``changes``."""
    values = schema.pick(TrainConfig, asdict(TrainConfig(data="-", output="-", epochs=1)))
    return {**values, **changes}
