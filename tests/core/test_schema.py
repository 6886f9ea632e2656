"""One schema per step: flags, pipeline parameters and MLflow params agree by construction."""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import json
from dataclasses import asdict, dataclass, fields

import pytest

from components import deploy, download, evaluate, preprocess, register, train
from components.core import schema
from components.core.schema import LOCAL, PER_RUN, RECIPE, setting
from components.deploying.config import DeployConfig
from components.downloading.config import DownloadConfig
from components.evaluation.config import EvaluateConfig
from components.networks.registry import NETS
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from components.training.config import MODEL_NAMES, TrainConfig
from components.tuning.grid import SWEEPABLE
from pipeline.parameters import STEP_SCHEMAS
from pipeline.target import PipelineOnly

STEPS = {
    DownloadConfig: download.build_parser,
    PreprocessConfig: preprocess.build_parser,
    TrainConfig: train.build_parser,
    EvaluateConfig: evaluate.build_parser,
    RegisterConfig: register.build_parser,
    DeployConfig: deploy.build_parser,
}


def test_every_step_with_flags_is_in_the_pipeline():
    assert set(STEPS) == set(STEP_SCHEMAS)


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.__name__)
def test_each_flag_defaults_to_its_schema_default(step):
    parser = STEPS[step]()
    for field in fields(step):
        default = None if field.default is dataclasses.MISSING else field.default
        assert parser.get_default(field.name) == default, field.name


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.__name__)
def test_a_flag_and_the_pipeline_parameter_of_one_setting_share_its_default(step, built_pipeline):
    parameters = inspect.signature(built_pipeline.pipeline_func).parameters
    shared = schema.fields_of(step, RECIPE, PER_RUN)
    assert shared, f"{step.__name__} has no pipeline parameter"
    parser = STEPS[step]()
    for field in shared:
        parameter = parameters[field.name]
        assert parameter.default == field.default == parser.get_default(field.name), field.name
        assert parameter.annotation is schema.field_type(step, field), field.name
    local = {field.name for field in schema.fields_of(step, LOCAL)}
    pipeline_only = {field.name for field in fields(PipelineOnly)}
    assert not local & (set(parameters) - pipeline_only), "a local flag leaked into the pipeline"


def test_the_pipeline_has_no_parameter_the_schemas_do_not_declare(built_pipeline):
    parameters = set(inspect.signature(built_pipeline.pipeline_func).parameters)
    declared = {
        field.name
        for step in (*STEP_SCHEMAS, PipelineOnly)
        for field in schema.fields_of(step, RECIPE, PER_RUN)
    }
    assert parameters == declared - {"gpus"}  # built for a CPU node: no GPUs to ask for


def test_mlflow_params_are_the_recipe_and_nothing_local():
    cfg = TrainConfig(data="d", output="o", epochs=3, checkpoint_uri="s3://bucket/c")
    params = schema.params(cfg)
    assert params["epochs"] == 3 and params["model"] == "tutorial_cnn"
    assert not {"data", "output", "checkpoint_uri", "resume", "experiment"} & set(params)


def test_the_model_choices_are_the_registrys_nets():
    (model,) = [field for field in fields(TrainConfig) if field.name == "model"]
    assert model.metadata["choices"] == MODEL_NAMES == tuple(NETS)


def test_a_sweep_combination_decodes_to_the_field_types():
    # kfp.local hands a loop item over as text: an int may read "5.0", a bool "false"
    text = '{"epochs": "5.0", "lr": "0.1", "augment": "false", "model": "bn_cnn"}'
    assert schema.decode(TrainConfig, text, SWEEPABLE) == {
        "epochs": 5,
        "lr": 0.1,
        "augment": False,
        "model": "bn_cnn",
    }
    quoted = json.dumps({"model": 'a "quoted" \\ value'})
    assert schema.decode(TrainConfig, quoted, ["model"]) == {"model": 'a "quoted" \\ value'}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"epoch": "5"}', r"unknown TrainConfig settings \['epoch'\]; expected some of: model"),
        ('{"experiment": "x"}', r"unknown TrainConfig settings \['experiment'\]"),  # not a recipe
        ('{"output": "/etc"}', r"unknown TrainConfig settings \['output'\]"),  # nor a path
        ('{"epochs": "5.5"}', "expected epochs to be int, found '5.5'"),
        ('{"augment": "maybe"}', "expected augment to be bool, found 'maybe'"),
        ('{"model": "a"b"}', "expected a JSON object of TrainConfig settings"),
        ('["model"]', "expected a JSON object of TrainConfig settings"),
    ],
)
def test_a_combination_names_only_the_fields_it_may_set(text, message):
    with pytest.raises(ValueError, match=message):
        schema.decode(TrainConfig, text, SWEEPABLE)


def test_a_tasks_inputs_are_the_schemas_pipeline_fields_and_nothing_else():
    cfg = TrainConfig(data="d", output="o", epochs=3, experiment="e", resume=True)
    values = schema.pick(TrainConfig, asdict(cfg))
    assert values["epochs"] == 3 and values["experiment"] == "e"
    assert set(values) == {f.name for f in schema.fields_of(TrainConfig, RECIPE, PER_RUN)}
    assert schema.pick(RegisterConfig, {"min_accuracy": 0.5, "alias": "champion", "x": 1}) == {
        "min_accuracy": 0.5
    }


def test_two_schemas_that_disagree_on_a_shared_setting_are_refused():
    @dataclass(frozen=True)
    class Other:
        seed: int = setting(1, "another seed")

    with pytest.raises(
        ValueError, match="seed is .* a shared setting needs one type and one default"
    ):
        schema.signature_parameters([TrainConfig, Other], RECIPE)


def test_a_default_on_bool_is_turned_off_by_its_no_flag():
    parser = argparse.ArgumentParser()
    schema.add_arguments(parser, TrainConfig)
    args = parser.parse_args(["--data", "d", "--output", "o", "--no-augment", "--resume"])
    cfg = schema.from_namespace(TrainConfig, args)
    assert cfg.augment is False and cfg.resume is True and cfg.amp is True
    argv = schema.to_argv(cfg)
    assert "--no-augment" in argv and "--resume" in argv
    assert not {"--no-amp", "--amp", "--augment", "--no-resume", "--dry-run"} & set(argv)


def test_a_refused_flag_ends_the_command_with_one_line_not_a_traceback(tmp_path):
    with pytest.raises(SystemExit, match="^error: expected retries, .* found retries=0$"):
        download.main(["--output", str(tmp_path / "out"), "--retries", "0"])
    with pytest.raises(SystemExit, match="^error: expected epochs >= 1, .* and -1.0$"):
        train.main(["--data", str(tmp_path), "--output", str(tmp_path / "out"), "--lr", "-1"])
    assert list(tmp_path.iterdir()) == []
