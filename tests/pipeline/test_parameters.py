"""The pipeline's parameters: the step schemas' pipeline fields, one type and default each,
and the very parameters of each built pipeline function."""

import ast
import functools
import inspect
import typing

import pytest

from components.core.schema import PIPELINE_ROLES, RECIPE, fields_of
from components.training.config import TrainConfig
from pipeline.parameters import (
    DESCRIPTIONS,
    PARAMETERS,
    STEP_SCHEMAS,
    TUNE_PARAMETERS,
    parameters_of,
)
from pipeline.pipeline import build_pipeline
from pipeline.target import PipelineOnly
from tests.conftest import REPO


@functools.cache
def built(sweep: bool = False, tune: bool = False):
    """Each pipeline function built once for the module's tests, which only read it."""
    return build_pipeline(sweep=sweep, tune=tune)


def test_every_pipeline_field_of_every_step_is_a_parameter():
    names = {f.name for s in (*STEP_SCHEMAS, PipelineOnly) for f in fields_of(s, *PIPELINE_ROLES)}
    assert set(PARAMETERS) == names
    assert PARAMETERS["epochs"] == (int, 10) and PARAMETERS["force_alias"] == (bool, False)
    assert not set(TUNE_PARAMETERS) & set(PARAMETERS)


@pytest.mark.parametrize("variant", [{}, {"sweep": True}, {"tune": True}])
def test_each_pipeline_function_takes_exactly_its_parameters(variant):
    """On a CPU node (the default placement) the spec asks for no GPUs."""
    function = built(**variant).pipeline_func
    signature = inspect.signature(function).parameters
    expected = parameters_of(**variant, on_gpu=False)
    assert list(signature) == list(expected) and "gpus" not in signature
    assert [name for name in parameters_of(**variant) if name != "gpus"] == list(expected)
    for name, (kind, default) in expected.items():
        assert (signature[name].annotation, signature[name].default) == (kind, default), name


@pytest.mark.parametrize("variant", [{}, {"sweep": True}, {"tune": True}])
def test_each_parameters_docstring_says_what_its_schema_says(variant):
    """The KFP UI shows the pipeline function's own words beside each parameter."""
    inputs = built(**variant).component_spec.inputs
    for name in parameters_of(**variant, on_gpu=False):
        assert " ".join(inputs[name].description.split()) == DESCRIPTIONS[name], name


def writings(name: str, kind: type) -> list[str]:
    """Where ``pipeline/`` writes setting ``name``: a parameter of its type, a hand-over
    by name (``name=name``), a string key; each as ``file:line``."""
    found = []
    for path in sorted((REPO / "pipeline").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            annotation = getattr(node, "annotation", None)
            if (
                (isinstance(node, ast.arg) and node.arg == name
                 and isinstance(annotation, ast.Name) and annotation.id == kind.__name__)
                or (isinstance(node, ast.keyword) and node.arg == name
                    and isinstance(node.value, ast.Name) and node.value.id == name)
                or (isinstance(node, ast.Constant) and node.value == name)
            ):  # fmt: skip
                found.append(f"{path.name}:{node.lineno}")
    return found


@pytest.mark.parametrize("field", fields_of(TrainConfig, RECIPE), ids=lambda f: f.name)
def test_a_recipe_setting_is_written_at_most_three_times_in_the_pipeline_layer(field):
    kind = typing.get_type_hints(TrainConfig)[field.name]
    found = writings(field.name, kind)
    assert 1 <= len(found) <= 3, f"{field.name} is written at {found}"
