"""The pipeline's parameters: the step schemas' pipeline fields, one type and default each,
and the very parameters of each built pipeline function."""

import inspect

import pytest

from components.core.schema import PIPELINE_ROLES, fields_of
from pipeline.parameters import (
    DESCRIPTIONS,
    PARAMETERS,
    STEP_SCHEMAS,
    TUNE_PARAMETERS,
    parameters_of,
)
from pipeline.pipeline import build_pipeline
from pipeline.target import PipelineOnly


def test_every_pipeline_field_of_every_step_is_a_parameter():
    names = {f.name for s in (*STEP_SCHEMAS, PipelineOnly) for f in fields_of(s, *PIPELINE_ROLES)}
    assert set(PARAMETERS) == names
    assert PARAMETERS["epochs"] == (int, 10) and PARAMETERS["force_alias"] == (bool, False)
    assert not set(TUNE_PARAMETERS) & set(PARAMETERS)


@pytest.mark.parametrize("variant", [{}, {"sweep": True}, {"tune": True}])
def test_each_pipeline_function_takes_exactly_its_parameters(variant):
    function = build_pipeline(**variant).pipeline_func
    signature = inspect.signature(function).parameters
    expected = parameters_of(**variant)
    assert list(signature) == list(expected)
    for name, (kind, default) in expected.items():
        assert (signature[name].annotation, signature[name].default) == (kind, default), name


@pytest.mark.parametrize("variant", [{}, {"sweep": True}, {"tune": True}])
def test_each_parameters_docstring_says_what_its_schema_says(variant):
    """The KFP UI shows the pipeline function's own words beside each parameter."""
    inputs = build_pipeline(**variant).component_spec.inputs
    for name in parameters_of(**variant):
        assert " ".join(inputs[name].description.split()) == DESCRIPTIONS[name], name
