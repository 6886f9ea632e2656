"""The search space: recipe fields only, each end of each range a recipe the step accepts."""

import itertools

import pytest

from components.core.schema import RECIPE, fields_of
from components.networks.backbones import BACKBONES
from components.training.config import TrainConfig
from components.tuning.search_space import (
    CATEGORICAL,
    DOUBLE,
    PRETRAINED_SPACE,
    SEARCH_SPACE,
    Dimension,
    search_space,
    searched,
)

SPACES = pytest.mark.parametrize("space", [SEARCH_SPACE, PRETRAINED_SPACE])


@SPACES
def test_every_dimension_is_a_training_recipe_field_of_its_type(space):
    recipe = {field.name: field for field in fields_of(TrainConfig, RECIPE)}
    for dimension in space:
        assert dimension.name in recipe, dimension.name
        default = recipe[dimension.name].default
        values = dimension.choices or (dimension.low, dimension.high)
        assert all(isinstance(value, type(default)) for value in values), dimension


@SPACES
def test_every_corner_of_the_space_is_a_recipe_the_train_step_accepts(space):
    ends = [d.choices if d.kind == CATEGORICAL else (d.low, d.high) for d in space]
    for corner in itertools.product(*ends):
        values = dict(zip((d.name for d in space), corner, strict=True))
        TrainConfig(data="-", output="-", **values)


def test_a_fixed_name_leaves_the_search():
    assert [d.name for d in searched({"lr": 0.004}, "bn_cnn")] == [
        d.name for d in SEARCH_SPACE if d.name != "lr"
    ]


@pytest.mark.parametrize("backbone", BACKBONES)
def test_a_pretrained_net_searches_learning_rates_that_keep_its_weights(backbone):
    (lr,) = [d for d in search_space(backbone) if d.name == "lr"]
    assert lr.high is not None and lr.high <= 3e-3
    assert search_space("stem16_residual_cnn") == SEARCH_SPACE


@pytest.mark.parametrize(
    "arguments",
    [
        {"kind": DOUBLE, "low": 1.0, "high": 0.5},
        {"kind": DOUBLE, "low": 0.0, "high": 1.0, "log": True},
        {"kind": CATEGORICAL},
        {"kind": "float", "low": 0.0, "high": 1.0},
    ],
)
def test_a_dimension_that_cannot_be_searched_is_refused(arguments):
    with pytest.raises(ValueError):
        Dimension("lr", **arguments)
