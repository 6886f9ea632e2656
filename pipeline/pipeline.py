"""The pipelines: download -> preprocess -> train (GPU) -> evaluate -> register -> deploy.

Each pipeline function's parameters are the step schemas' pipeline fields
(``pipeline.parameters``): KFP reads a function's signature and docstring, so each is
given the fields' names, types and defaults as its signature and their help as its
docstring's ``Args``. A setting is declared once, in its schema, and appears in the
compiled spec, the KFP UI and ``name=value`` with its type, default and description.
"""

import inspect
from collections.abc import Callable
from typing import Any

from kfp import dsl

from components.recipes.recipe import Recipe
from pipeline.parameters import DESCRIPTIONS, parameters_of
from pipeline.target import ClusterTarget
from pipeline.wiring import (
    PIPELINE_NAME,
    PipelineOutputs,
    Settings,
    SweepOutputs,
    TuneOutputs,
    wire,
    wire_sweep,
    wire_tune,
)

DESCRIPTION = "Train, evaluate and register a Dogs-vs-Cats classifier."
SWEEP_DESCRIPTION = "Train a grid of Dogs-vs-Cats recipes as child MLflow runs; register the best."
TUNE_DESCRIPTION = "Search the Dogs-vs-Cats recipe with Katib; evaluate and register the best."


def build_pipeline(
    target: ClusterTarget | None = None,
    sweep: bool = False,
    tune: bool = False,
    recipe: Recipe | None = None,
) -> Any:
    """The ``@dsl.pipeline`` function for ``target``: compile it, or call it under kfp.local.

    With ``sweep``, the pipeline takes one more parameter, ``grid`` (a list of JSON
    objects of recipe fields), and trains and evaluates each combination as a child
    MLflow run under one parent; the best by validation accuracy is sent to registration.
    With ``tune``, the cluster's Katib searches the recipe (the search's settings added)
    and the best trial's model is evaluated and sent to registration. With ``recipe``, its
    values are the parameters' defaults (else the step schemas' defaults are); ``gpus`` is
    a parameter only where ``target`` trains on a GPU.
    """
    target = target or ClusterTarget()
    on_gpu = target.training.on_gpu
    if (sweep or tune) and target.nodes > 1:
        raise ValueError("expected a sweep or search on one node per trial, found --nodes > 1")
    if sweep and tune:
        raise ValueError("expected a sweep or a search, found both")
    if sweep:
        function = pipeline_function(
            "dogs_vs_cats_sweep",
            SWEEP_DESCRIPTION,
            parameters_of(sweep=True, recipe=recipe, on_gpu=on_gpu),
            SweepOutputs,
            lambda values: wire_sweep(Settings.of(values), values["grid"], target),
        )
        return dsl.pipeline(name=f"{PIPELINE_NAME}-sweep", description=SWEEP_DESCRIPTION)(function)
    if tune:
        function = pipeline_function(
            "dogs_vs_cats_tune",
            TUNE_DESCRIPTION,
            parameters_of(tune=True, recipe=recipe, on_gpu=on_gpu),
            TuneOutputs,
            lambda values: wire_tune(Settings.of(values), Settings.search_of(values), target),
        )
        return dsl.pipeline(name=f"{PIPELINE_NAME}-tune", description=TUNE_DESCRIPTION)(function)
    function = pipeline_function(
        "dogs_vs_cats",
        DESCRIPTION,
        parameters_of(recipe=recipe, on_gpu=on_gpu),
        PipelineOutputs,
        lambda values: wire(Settings.of(values), target),
    )
    return dsl.pipeline(name=PIPELINE_NAME, description=DESCRIPTION)(function)


def pipeline_function(
    name: str,
    description: str,
    parameters: dict[str, tuple[type, Any]],
    outputs: type,
    body: Callable[[dict[str, Any]], Any],
) -> Callable[..., Any]:
    """A function as KFP reads a pipeline: ``parameters`` (``{name: (type, default)}``) its
    signature, their ``DESCRIPTIONS`` its docstring's ``Args``, ``outputs`` what it returns;
    called (KFP calls it with one channel a parameter, in order), it hands ``body`` the
    values by name."""
    names = list(parameters)

    def function(*values: Any) -> Any:
        return body(dict(zip(names, values, strict=True)))

    function.__name__ = function.__qualname__ = name
    function.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(key, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                              annotation=kind)
            for key, (kind, default) in parameters.items()
        ],
        return_annotation=outputs,
    )  # fmt: skip
    args = "".join(f"    {key}: {DESCRIPTIONS[key]}\n" for key in names)
    function.__doc__ = f"{description}\n\nArgs:\n{args}"
    return function
