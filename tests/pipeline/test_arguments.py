"""name=value pairs as pipeline arguments: presets, conversion, refusals, sweep grids."""

from __future__ import annotations

import json

import pytest

from components.recipes.recipe import load_recipe
from pipeline.arguments import parse_arguments, sweep_arguments
from pipeline.parameters import PARAMETERS, parameters_of


def test_preset_expands_into_parameters_that_pairs_override():
    arguments = parse_arguments(["epochs=2"], PARAMETERS, load_recipe("accurate"))
    assert arguments["model"] == "efficientnet_lite0" and arguments["image_size"] == 224
    assert arguments["channels"] == 3 and arguments["epochs"] == 2
    assert arguments["min_crop_area"] == 0.25 and arguments["label_smoothing"] == 0.1
    assert arguments["min_accuracy"] == 0.98  # each preset's own gate
    tutorial = parse_arguments(["min_accuracy=0.5"], PARAMETERS, load_recipe("tutorial"))
    assert tutorial["model"] == "five_conv_cnn" and tutorial["min_accuracy"] == 0.5
    cpu = parse_arguments(["mirror_average=false"], PARAMETERS, load_recipe("cpu"))
    assert cpu["image_size"] == 96 and cpu["epochs"] == 30 and cpu["min_accuracy"] == 0.93
    assert cpu["mirror_average"] is False  # a bool recipe setting, overridden by a pair


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["epochs=abc"], "expected epochs to be int, found 'abc'"),
        (["augment=maybe"], "expected augment to be bool, found 'maybe'"),
        (["epochs=0"], "starts: expected epochs >= 1"),
        (["lr=nan"], "finite lr > 0, found 10, 100 and nan"),
        (["val_fraction=0.5", "test_fraction=0.5"], "sum to less than 1, found val=0.5"),
        (["min_accuracy=93"], r"min_accuracy from 0 to 1, found 93 \(a share: 0.93 for 93%\)"),
        (["gpus=0"], "1 or more GPUs for the train task, found 0"),
        (["sha256=abc"], "sha256 of 64 hex digits"),
        (["image_size=1000"], "image size from 8 to 512, found 1000"),
        (["seed=1", "seed=2"], "expected each name once, found seed again in 'seed=2'"),
        (["epoch=1"], "unknown setting 'epoch' in 'epoch=1': did you mean epochs=?"),
        (["zzz=1"], "unknown setting 'zzz' in 'zzz=1': expected one of: source, sha256"),
        (["epochs"], "expected name=value, found 'epochs'"),
    ],
)
def test_bad_pipeline_arguments_are_refused_before_the_run_starts(pairs, message):
    with pytest.raises(SystemExit, match=message):
        parse_arguments(pairs, PARAMETERS)


def test_sweep_pairs_become_a_grid_and_a_bad_combination_is_refused_before_running():
    pipeline = parameters_of(sweep=True)
    arguments = sweep_arguments(
        ["lr=0.001,0.003", "model=tutorial_cnn,bn_cnn", "epochs=2"], pipeline
    )
    assert arguments["epochs"] == 2 and len(arguments["grid"]) == 4
    assert json.loads(arguments["grid"][0]) == {"lr": 0.001, "model": "tutorial_cnn"}
    with pytest.raises(SystemExit, match="refused: unknown model 'vgg'"):
        sweep_arguments(["model=tutorial_cnn,vgg"], pipeline)
    with pytest.raises(SystemExit, match="image_size"):  # a comma sweeps recipe fields only
        sweep_arguments(["lr=0.1,0.2", "image_size=40,64"], pipeline)
    with pytest.raises(SystemExit, match="expected at least one name=v1,v2 pair"):
        sweep_arguments(["lr=0.001"], pipeline)
    # a source path with a comma arrives as typed: only recipe fields are split
    typed = sweep_arguments(["lr=0.001,0.003", "source=/data/cats,dogs.zip"], pipeline)
    assert typed["source"] == "/data/cats,dogs.zip" and len(typed["grid"]) == 2
    seeds, rates = ",".join(map(str, range(100))), ",".join(f"0.00{i}" for i in range(1, 10))
    with pytest.raises(
        SystemExit, match="at most 1000 training runs, found 100 seed × 9 lr × 2 epochs = 1800"
    ):
        sweep_arguments([f"seed={seeds}", f"lr={rates}", "epochs=1,2"], pipeline)
