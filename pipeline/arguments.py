"""``name=value`` pairs as the pipeline's arguments, each checked by its step's schema."""

import difflib
import json
from typing import Any

from components.core import schema
from components.core.uris import holds_credentials, redact
from components.data.sources import check_local_source
from components.recipes.recipe import Recipe
from components.training.config import TrainConfig
from components.tuning.config import TuneConfig, check_search
from components.tuning.grid import SWEEPABLE, grid, split_pairs
from pipeline.parameters import STEP_SCHEMAS, recipe_arguments
from pipeline.target import PipelineOnly

Parameters = dict[str, tuple[type, Any]]  # {name: (type, default)}, as pipeline.parameters


def parse_arguments(
    pairs: list[str], parameters: Parameters, recipe: Recipe | None = None
) -> dict[str, Any]:
    """``name=value`` pairs, each value converted to the type of the pipeline's parameter.

    A ``recipe``'s values come first; explicit pairs override them. Every step's settings
    are then checked (``SystemExit`` with the step's own message).
    """
    values = recipe_arguments(recipe)
    arguments = {name: value for name, value in values.items() if name in parameters}
    given: set[str] = set()
    for pair in pairs:
        name, value = typed_value(pair, parameters)
        if name in given:
            raise SystemExit(f"expected each name once, found {name} again in {pair!r}")
        given.add(name)
        arguments[name] = value
    check_arguments(arguments, parameters)
    return arguments


def refuse_credentials(arguments: dict[str, Any], names: tuple[str, ...]) -> None:
    """Refuse a user and password in the URIs ``names``: a run's parameters are shown.

    The KFP UI and API show every run's parameters, and kfp.local prints every task's
    inputs; credentials belong in the Kubernetes secrets the tasks read (docs/deploy.md).
    """
    for name in names:
        value = str(arguments.get(name, ""))
        if holds_credentials(value):
            raise SystemExit(
                f"refused: {name}={redact(value)} holds a password or a secret, which every "
                "reader of the run's parameters would see; give them through the "
                "environment (MLFLOW_TRACKING_USERNAME/PASSWORD, AWS_* keys) or the "
                "cluster's secrets (dogs-vs-cats-mlflow, dogs-vs-cats-s3)"
            )


def refuse_missing_source(source: str | None) -> None:
    """Refuse a local source that is not there, at once: not minutes later, when the
    download task finds nothing."""
    try:
        check_local_source(source or "")
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"refused before the run starts: {err}") from None


def typed_value(pair: str, parameters: Parameters) -> tuple[str, object]:
    """``name=value`` as the name and the value in its pipeline parameter's type."""
    name, sep, value = pair.partition("=")
    if not sep:
        raise SystemExit(f"expected name=value, found {pair!r}")
    if name not in parameters:
        close = difflib.get_close_matches(name, parameters, n=1)
        known = ", ".join(parameters)
        hint = f"did you mean {close[0]}=?" if close else f"expected one of: {known}"
        raise SystemExit(f"unknown setting {name!r} in {pair!r}: {hint}")
    try:
        return name, schema.convert(parameters[name][0], value, name)
    except ValueError as err:
        raise SystemExit(str(err)) from None


def check_arguments(arguments: dict[str, Any], parameters: Parameters) -> None:
    """Build every step's settings from ``arguments`` (defaults for the rest, placeholders
    or a field's example for what a step learns at run time): a bad value is refused now,
    not when its step runs, maybe hours into the run."""
    values = {name: arguments.get(name, default) for name, (_, default) in parameters.items()}
    searching = (TuneConfig,) if "trials" in parameters else ()  # the tune pipeline's search
    try:
        built = {
            step: schema.build(step, values) for step in (*STEP_SCHEMAS, PipelineOnly, *searching)
        }
    except ValueError as err:
        raise SystemExit(f"refused before the run starts: {err}") from None
    if searching:  # the check tune --output and tune --local take too
        try:
            check_search(built[TuneConfig], built[TrainConfig].epochs)
        except ValueError as err:
            raise SystemExit(f"refused before the run starts: {err}") from None


def sweep_arguments(
    pairs: list[str], parameters: Parameters, recipe: Recipe | None = None
) -> dict[str, Any]:
    """The pipeline arguments of a sweep: ``name=v1,v2`` pairs become the ``grid``."""
    fixed, axes = split_pairs(pairs)
    arguments = parse_arguments(fixed, parameters, recipe)
    arguments["grid"] = grid(
        {
            name: [typed_value(f"{name}={value}", parameters)[1] for value in values]
            for name, values in axes.items()
        }
    )
    for combination in arguments["grid"]:  # refused now, not in a child an hour from now
        start = {name: arguments.get(name, parameters[name][1]) for name in SWEEPABLE}
        try:
            TrainConfig(data="", output="", **{**start, **json.loads(combination)})
        except ValueError as err:
            raise SystemExit(f"a sweep combination {combination} is refused: {err}") from None
    return arguments
