"""A sweep: a grid of training recipes, one child MLflow run each under one parent run.

``lr=0.001,0.003 model=tutorial_cnn,bn_cnn`` is a grid of four combinations; the
pipeline trains and evaluates each (KFP's ``ParallelFor``), marks the child with the best
validation accuracy, and sends that child alone to registration.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from typing import Any

from components.core import schema
from components.core.schema import RECIPE
from components.training.config import TrainConfig

MAX_COMBINATIONS = 1000  # each is a training run; a grid beyond this is a typo, not a plan
SWEEPABLE = [field.name for field in schema.fields_of(TrainConfig, RECIPE)]


def split_pairs(pairs: list[str]) -> tuple[list[str], dict[str, list[str]]]:
    """``name=value`` pairs apart from ``name=v1,v2,...`` axes of the grid: a comma splits
    the value of a training recipe field only.

    Raises:
        SystemExit: a name is given twice, or no recipe field is swept.
    """
    fixed: list[str] = []
    axes: dict[str, list[str]] = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name in axes or any(given.partition("=")[0] == name for given in fixed):
            raise SystemExit(f"expected each name once, found {name} again in {pair!r}")
        if name in SWEEPABLE and "," in value:
            axes[name] = value.split(",")
        else:  # any other value arrives as typed, commas and all (a path, a URI)
            fixed.append(pair)
    if not axes:
        raise SystemExit(
            "expected at least one name=v1,v2 pair to sweep over a training recipe field "
            f"({', '.join(SWEEPABLE)}), e.g. lr=0.001,0.003"
        )
    return fixed, axes


def grid(axes: dict[str, list[object]]) -> list[str]:
    """Every combination of the axes' typed values, each a JSON object of recipe fields.

    Raises:
        SystemExit: an axis names one value twice (``lr=0.001,1e-3``), or the grid has
            more than ``MAX_COMBINATIONS`` combinations.
    """
    for name, values in axes.items():
        twice = sorted({repr(v) for v in values if values.count(v) > 1})
        if twice:
            raise SystemExit(
                f"expected different values of {name}, found {', '.join(twice)} more than once"
            )
    count = math.prod(len(values) for values in axes.values())
    if count > MAX_COMBINATIONS:
        sizes = " × ".join(f"{len(values)} {name}" for name, values in axes.items())
        raise SystemExit(
            f"expected a grid of at most {MAX_COMBINATIONS} training runs, found {sizes} = {count}"
        )
    names = list(axes)
    return [
        json.dumps(dict(zip(names, values, strict=True)), sort_keys=True)
        for values in itertools.product(*axes.values())
    ]


def check_grid(combinations: list[Any]) -> None:
    """Refuse a grid that cannot run: empty, too large, or a combination that is not a JSON
    object of recipe settings with valid values.

    Raises:
        ValueError: what was expected and what the grid holds.
    """
    if not combinations:
        raise ValueError(
            'expected a grid of one or more combinations, e.g. ["{\\"lr\\": 0.001}"], found '
            "an empty list"
        )
    if len(combinations) > MAX_COMBINATIONS:
        found = len(combinations)
        raise ValueError(
            f"expected a grid of at most {MAX_COMBINATIONS} training runs, found {found}"
        )
    for combination in combinations:
        if not isinstance(combination, str):  # each is handed to a train task's str input
            raise ValueError(
                f"expected each combination as a JSON string, e.g. '{{\"lr\": 0.001}}', found "
                f"{json.dumps(combination)}"
            )
        try:
            decoded = schema.decode(TrainConfig, combination, SWEEPABLE)
            TrainConfig(data="-", output="-", **decoded)
        except (TypeError, ValueError) as err:
            raise ValueError(f"combination {combination} of the grid: {err}") from None


def combination_key(combination: str) -> str:
    """A short, stable name for a combination: its checkpoint folder in a sweep."""
    return hashlib.sha256(combination.encode()).hexdigest()[:12]
