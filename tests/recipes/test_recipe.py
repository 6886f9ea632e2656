"""Recipes: the named presets and recipe files, checked by the same schemas, every step
and the pipeline reading them, explicit settings winning."""

from __future__ import annotations

import argparse
import dataclasses

import pytest
from mlflow.tracking import MlflowClient

from components import train
from components.cluster.placement import Placement
from components.core import schema
from components.recipes.presets import (
    CLUSTER_PRESET,
    DEFAULT_PRESET,
    DEFAULTS_SAID,
    ON_CPU,
    ON_GPU,
    PRESETS,
    PURPOSES,
)
from components.recipes.recipe import (
    STEP_SCHEMAS,
    apply_preset,
    check_recipe,
    load_recipe,
    placement_of,
    recipe_fields,
    recipe_values,
)
from components.recipes.recipe_file import MOST_RECIPE_BYTES
from components.training import session
from components.training.config import TrainConfig
from pipeline.parameters import PARAMETERS

PLACEMENT_FIELDS = {field.name for field in dataclasses.fields(Placement)}


@pytest.mark.parametrize("name", PRESETS)
def test_every_preset_passes_the_check_a_recipe_file_takes(name):
    values = recipe_values(name)
    assert check_recipe(values) == values  # already of its fields' types
    assert set(values) <= set(PARAMETERS) | PLACEMENT_FIELDS
    assert values["hardware"] in ("cpu", "gpu")  # every preset says where it trains


def test_the_baseline_is_the_schemas_defaults_and_names_every_setting_a_preset_sets():
    fields = recipe_fields()
    set_by_presets = {name for values in PRESETS.values() for name in values}
    assert set_by_presets <= set(PRESETS["baseline"])
    for name, value in PRESETS["baseline"].items():
        step, field = fields[name]
        if step is not Placement:
            assert field.default == value, name


def test_one_default_the_placement_schemas_are_the_default_presets():
    assert placement_of({}, {}) == Placement(**ON_CPU) == Placement()
    assert load_recipe().name == DEFAULT_PRESET and load_recipe().placement() == Placement()
    assert load_recipe(CLUSTER_PRESET).placement() == Placement(**ON_GPU)
    assert set(PURPOSES) == set(PRESETS)  # each preset's one line for --help


def test_a_recipe_file_naming_no_preset_starts_from_the_default_on_its_node(tmp_path):
    recipe = tmp_path / "short.yaml"
    recipe.write_text("epochs: 2\n")
    loaded = load_recipe(str(recipe))
    assert loaded.values == {**PRESETS[DEFAULT_PRESET], "epochs": 2}
    assert loaded.placement() == Placement() and not loaded.placement().on_gpu


def test_a_mistyped_preset_to_a_step_is_refused_in_two_lines(capsys):
    with pytest.raises(SystemExit) as refused:
        train.parse_config(["--data", "d", "--output", "o", "--preset", "pretraned"])
    assert refused.value.code == 2
    said = capsys.readouterr().err.splitlines()
    assert said[0] == "usage: python -m components.train [--preset NAME|FILE.yaml] [options]"
    assert said[1:] == [
        "python -m components.train: error: argument --preset: unknown preset 'pretraned'; "
        "did you mean pretrained? expected one of: baseline, tutorial, cpu, pretrained, "
        "few-photos, accurate, or a recipe file NAME.yaml"
    ]


def test_a_steps_help_lists_the_presets_a_line_each_and_the_defaults(capsys):
    with pytest.raises(SystemExit):
        train.parse_config(["--help"])
    shown = capsys.readouterr().out
    for name, purpose in PURPOSES.items():
        assert any(line.split() == [name, *purpose.split()] for line in shown.splitlines())
    assert " ".join(DEFAULTS_SAID.split()) in " ".join(shown.split())
    assert "{'image_size'" not in shown


def test_a_bad_flag_value_to_a_step_gets_a_short_usage(capsys):
    with pytest.raises(SystemExit):
        train.parse_config(["--data", "d", "--output", "o", "--epochs", "ten"])
    said = capsys.readouterr().err.splitlines()
    assert len(said) == 2 and "--epochs: invalid int value: 'ten'" in said[1]


def test_a_flag_that_moves_a_recipe_to_other_hardware_takes_that_hardwares_placement():
    moved = placement_of(recipe_values("accurate"), {"hardware": "cpu", "memory": "6Gi"})
    assert moved == Placement(**{**ON_CPU, "memory": "6Gi"})
    assert not moved.on_gpu and moved.node_label is None and not moved.toleration_key


def test_a_preset_sets_a_steps_defaults_and_explicit_flags_win():
    parser = argparse.ArgumentParser()
    schema.add_arguments(parser, TrainConfig)
    argv = ["--data", "d", "--output", "o", "--preset", "accurate", "--epochs", "3"]
    apply_preset(parser, argv, TrainConfig)
    cfg = schema.from_namespace(TrainConfig, parser.parse_args(argv))
    assert (cfg.model, cfg.batch_size, cfg.epochs) == ("efficientnet_lite0", 128, 3)
    assert "min_accuracy" not in vars(parser.parse_args(argv))  # another step's setting


def test_an_unknown_preset_lists_the_known_ones_and_recipe_files():
    with pytest.raises(ValueError, match="unknown preset 'fastest'; expected one of: baseline"):
        recipe_values("fastest")


def test_a_recipe_file_starts_from_its_preset_and_its_settings_win(tmp_path):
    recipe = tmp_path / "my-recipe.yaml"
    recipe.write_text("preset: cpu\nepochs: 20\nlr: '0.002'\nqueue_name: team-a-cpu\n")
    values = recipe_values(str(recipe))
    assert values == {**PRESETS["cpu"], "epochs": 20, "lr": 0.002, "queue_name": "team-a-cpu"}


def test_a_recipe_file_that_moves_to_a_gpu_takes_the_gpus_placement(tmp_path):
    recipe = tmp_path / "on-gpu.yml"
    recipe.write_text("preset: pretrained\nhardware: gpu\nfrozen_blocks: 0\ncached_views: 0\n")
    values = recipe_values(str(recipe))
    assert placement_of(values, {}) == Placement(**ON_GPU)
    assert values["model"] == "efficientnet_lite2" and values["frozen_blocks"] == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("preset: cpu\nepoch: 20\n", "unknown setting 'epoch': did you mean epochs?"),
        ("epochs: ten\n", "expected epochs to be int, found 'ten'"),
        ("model: resnet9000\n", "expected model as one of"),
        ("hardware: tpu\n", "expected hardware as one of gpu, cpu, found 'tpu'"),
        ("preset: fastest\n", "expected preset: one of baseline"),
        ("preset: [cpu]\n", "expected preset: one of baseline"),
        ("preset: pretrained\nmodel: bn_cnn\n", "frozen_blocks, cached_views: expected 0 to 0"),
        ("epochs: [1, 2]\n", "expected epochs to be one value"),
        ("- epochs\n", "expected YAML settings (name: value), found a list of 1 items"),
        ("epochs: 0\n", "epochs: expected epochs >= 1"),
        ("model: tutorial_cnn\nfrozen_blocks: 3\n", ": frozen_blocks: expected"),
        ("cpu: lots\n", "cpu: expected a CPU quantity"),
        ("!!python/object/apply:os.system ['touch pwned']\n", "expected YAML settings"),
        ("epochs: 1\n  lr: [\n", "expected YAML settings"),
        ("epochs: 3\nlr 0.1\nseed: 1\n", "could not find expected ':' at line 3, column 1"),
    ],
)
def test_a_bad_recipe_file_is_refused_in_one_line_naming_the_file_and_the_field(
    tmp_path, text, message
):
    recipe = tmp_path / "bad.yaml"
    recipe.write_text(text)
    with pytest.raises(ValueError) as refused:
        recipe_values(str(recipe))
    assert str(refused.value).startswith(f"{recipe}: ")
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert not (tmp_path / "pwned").exists()


def test_a_recipe_file_too_big_or_missing_is_refused_before_it_is_parsed(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MOST_RECIPE_BYTES + "\nepochs: 1\n")
    with pytest.raises(ValueError, match="at most 64 KiB"):
        recipe_values(str(big))
    with pytest.raises(ValueError, match="expected a readable recipe file"):
        recipe_values(str(tmp_path / "gone.yaml"))


def test_a_refusal_never_formats_a_value_whole(tmp_path):
    recipe = tmp_path / "long.yaml"
    recipe.write_text(f"model: {'x' * 60_000}\nepochs: [{', '.join(['1'] * 10_000)}]\n")
    with pytest.raises(ValueError) as refused:
        recipe_values(str(recipe))
    assert len(str(refused.value)) < 400


@pytest.mark.parametrize(
    "text, expected",
    [
        ("preset: pretrained\nfrozen_blocks: 14\n", {"frozen_blocks": 14}),
        ("preset: cpu\nmemory: 1Gi\n", {"memory": "1Gi"}),
    ],
)
def test_a_recipe_file_is_checked_after_its_preset_is_merged(tmp_path, text, expected):
    """Judged beside the preset's other settings, as the same values given as flags are."""
    recipe = tmp_path / "merged.yaml"
    recipe.write_text(text)
    values = recipe_values(str(recipe))
    assert values.items() >= expected.items()


def test_every_schema_a_recipe_sets_is_checked():
    assert {step.__name__ for step, _ in recipe_fields().values()} == {
        *(step.__name__ for step in STEP_SCHEMAS),
        "Placement",
    }


def test_the_train_step_trains_a_recipe_file(small_arrays, tmp_path, mlflow_store):
    recipe = tmp_path / "short.yaml"
    recipe.write_text("preset: baseline\nepochs: 2\nlr: 0.002\nbatch_size: 50\n")
    argv = ["--data", str(small_arrays), "--output", str(tmp_path / "m"), "--preset", str(recipe)]
    result = session.train(train.parse_config(argv))
    params = MlflowClient(mlflow_store).get_run(result.run_id).data.params
    assert (params["epochs"], params["lr"], params["batch_size"]) == ("2", "0.002", "50")
    assert len(result.history) == 2


def test_the_train_step_refuses_a_bad_recipe_file_in_one_line(tmp_path, capsys):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text("epochs: 2\nlearning_rate: 0.1\n")
    argv = ["--data", "d", "--output", str(tmp_path / "m"), "--preset", str(recipe)]
    with pytest.raises(SystemExit):
        train.parse_config(argv)
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "unknown setting 'learning_rate'" in error and str(recipe) in error


def test_a_steps_help_after_a_preset_shows_the_values_it_will_use(capsys):
    with pytest.raises(SystemExit):
        train.parse_config(["--preset", "pretrained", "--help"])
    flat = " ".join(capsys.readouterr().out.split())
    values = PRESETS["pretrained"]
    assert f"(default: {values['model']})" in flat and f"(default: {values['epochs']})" in flat
    assert "--int8 also write model.int8.onnx" in flat and "(default: True)" in flat
