"""A sweep's grid: its axes, its combinations as JSON, their keys."""

from __future__ import annotations

import json

import pytest

from components.tuning import grid as sweep


def test_pairs_with_commas_are_axes_and_the_rest_fixed():
    fixed, axes = sweep.split_pairs(["epochs=2", "lr=0.1,0.01", "model=bn_cnn,resnet18"])
    assert fixed == ["epochs=2"] and axes == {
        "lr": ["0.1", "0.01"],
        "model": ["bn_cnn", "resnet18"],
    }
    # not a recipe field: its value as typed, commas and all
    assert sweep.split_pairs(["experiment=a,b", "lr=0.1,0.2"])[0] == ["experiment=a,b"]
    with pytest.raises(SystemExit, match="expected each name once, found lr again"):
        sweep.split_pairs(["lr=0.1,0.2", "lr=0.3"])
    with pytest.raises(SystemExit, match="expected at least one name=v1,v2 pair"):
        sweep.split_pairs(["epochs=2"])


def test_the_grid_is_every_combination_as_a_sorted_json_object():
    grid = sweep.grid({"lr": [0.1, 0.01], "augment": [True, False]})
    assert [json.loads(c) for c in grid] == [
        {"augment": True, "lr": 0.1},
        {"augment": False, "lr": 0.1},
        {"augment": True, "lr": 0.01},
        {"augment": False, "lr": 0.01},
    ]
    assert all(c == json.dumps(json.loads(c), sort_keys=True) for c in grid)
    with pytest.raises(SystemExit, match=r"found 11 seed × 100 lr = 1100"):
        sweep.grid({"seed": list(range(11)), "lr": [i / 1000 for i in range(100)]})


def test_a_combination_has_a_stable_short_key_of_its_own():
    keys = {sweep.combination_key(c) for c in sweep.grid({"lr": [0.1, 0.2, 0.3]})}
    assert len(keys) == 3 and all(len(k) == 12 for k in keys)
    assert sweep.combination_key('{"lr": 0.1}') == sweep.combination_key('{"lr": 0.1}')


def test_a_name_given_twice_is_refused_not_replaced():
    with pytest.raises(SystemExit, match="expected each name once, found model again"):
        sweep.split_pairs(["model=bn_cnn,resnet18", "model=tutorial_cnn,compact_cnn"])
    with pytest.raises(SystemExit, match="expected each name once, found lr again"):
        sweep.split_pairs(["lr=0.1", "lr=0.01,0.02"])


def test_values_that_convert_to_the_same_are_one_combination_refused():
    with pytest.raises(SystemExit, match="expected different values of lr, found 0.001 more"):
        sweep.grid({"lr": [0.001, 1e-3]})


def test_a_grid_from_the_ui_is_checked_whole_before_anything_runs():
    sweep.check_grid(['{"lr": 0.01}', '{"model": "bn_cnn", "epochs": 2}'])
    refusals = {
        "expected a grid of one or more combinations": [],
        "unknown TrainConfig settings \\['gpus'\\]": ['{"gpus": 2}'],
        'combination {"model": "vgg"} of the grid': ['{"model": "vgg"}'],
        "expected a JSON object": ["lr=0.1"],
        "expected each combination as a JSON string": [{"lr": 0.1}],
        f"at most {sweep.MAX_COMBINATIONS} training runs": ['{"lr": 0.1}'] * 1001,
    }
    for message, grid in refusals.items():
        with pytest.raises(ValueError, match=message):
            sweep.check_grid(grid)
