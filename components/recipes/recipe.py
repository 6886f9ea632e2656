"""A recipe by name (a preset) or as a file, checked against the schemas it sets.

A recipe file is YAML: settings by field name, as a preset holds them, and optionally
``preset: NAME``, the named recipe it starts from. It is read as bounded data
(``recipe_file``) and, merged over its preset, checked as ``PRESETS`` are: every name a
field of a step schema or of ``Placement``, every value of its field's type and choices,
and each schema built with it.

    preset: cpu
    epochs: 20
    lr: 0.002
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
from pathlib import Path
from typing import Any

from components.cluster.placement import HARDWARE, Placement
from components.core import schema
from components.core.errors import brief
from components.preprocessing.config import PreprocessConfig
from components.recipes.presets import ON_CPU, ON_GPU, PRESETS
from components.recipes.recipe_file import read_mapping
from components.registration.config import RegisterConfig
from components.training.config import TrainConfig

STEP_SCHEMAS = (PreprocessConfig, TrainConfig, RegisterConfig)  # the steps a recipe sets
BASE = "preset"  # a recipe file's key naming the preset it starts from
RECIPE_SUFFIXES = (".yaml", ".yml")
ON_HARDWARE = {"cpu": ON_CPU, "gpu": ON_GPU}


def recipe_fields() -> dict[str, tuple[type, dataclasses.Field[Any]]]:
    """Every setting a recipe may hold: the steps' pipeline fields and the placement's."""
    fields: dict[str, tuple[type, dataclasses.Field[Any]]] = {
        field.name: (step, field)
        for step in STEP_SCHEMAS
        for field in schema.fields_of(step, *schema.PIPELINE_ROLES)
    }
    fields.update({field.name: (Placement, field) for field in dataclasses.fields(Placement)})
    return fields


def recipe_values(name: str) -> dict[str, Any]:
    """The settings of preset ``name``, or of the recipe file at ``name`` (``*.yaml``).

    Raises:
        ValueError: an unknown preset, or a file that is missing, too big, not YAML, or
            sets a setting the schemas refuse; in one line naming the file and the field.
    """
    if name.endswith(RECIPE_SUFFIXES):
        return read_recipe(Path(name))
    if name not in PRESETS:
        raise ValueError(
            f"unknown preset {name!r}; expected one of: {', '.join(PRESETS)}, or a recipe "
            "file NAME.yaml"
        )
    return dict(PRESETS[name])


def read_recipe(path: Path) -> dict[str, Any]:
    """A recipe file's settings over those of the preset it names (if any), checked
    together: a setting is judged with the preset's others beside it."""
    try:
        settings = read_mapping(path)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    base = settings.pop(BASE, None)
    if base is not None and not (isinstance(base, str) and base in PRESETS):
        raise ValueError(
            f"{path}: expected {BASE}: one of {', '.join(PRESETS)} (the recipe it starts "
            f"from), found {brief(base)}"
        )
    start = dict(PRESETS[base]) if base else {}
    try:
        if "hardware" in settings:  # a file that moves the recipe takes that hardware's placement
            hardware = check_recipe({"hardware": settings["hardware"]})["hardware"]
            start = {**start, **_placement_for(hardware, start)}
        return check_recipe({**start, **settings})
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def check_recipe(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` as their fields' types, every step built with them.

    Raises:
        ValueError: a name no schema has (with the closest one), a value of the wrong type
            or outside its choices, or a combination a schema refuses.
    """
    fields = recipe_fields()
    typed = {}
    for name, value in values.items():
        if name not in fields:
            close = difflib.get_close_matches(str(name)[:100], fields, n=1)
            hint = f"did you mean {close[0]}?" if close else "expected a setting of the steps"
            raise ValueError(f"unknown setting {brief(name)}: {hint}")
        step, field = fields[name]
        if isinstance(value, dict | list):
            raise ValueError(f"expected {name} to be one value, found {brief(value)}")
        typed[name] = schema.convert(schema.field_type(step, field), value, name)
        choices = field.metadata["choices"]
        if choices and typed[name] not in choices:
            raise ValueError(
                f"expected {name} as one of {', '.join(map(str, choices))}, found {brief(value)}"
            )
    for step in (*STEP_SCHEMAS, Placement):
        given = {name: typed[name] for name in typed if fields[name][0] is step}
        try:
            schema.build(step, given)
        except ValueError as err:  # named: the settings the schema refuses on their own
            named = [name for name in given if _refused(step, {name: given[name]})]
            raise ValueError(f"{', '.join(named or given)}: {err}") from None
    return typed


def _refused(step: type, values: dict[str, Any]) -> bool:
    try:
        schema.build(step, values)
    except ValueError:
        return True
    return False


def placement_of(values: dict[str, Any], explicit: dict[str, Any]) -> Placement:
    """Where a recipe trains: its hardware's placement, the recipe's own fields over it (if
    it is on that hardware), ``explicit`` flags over both."""
    hardware = explicit.get("hardware", values.get("hardware", "gpu"))
    return Placement(**{**_placement_for(hardware, values), **explicit})


def _placement_for(hardware: str, values: dict[str, Any]) -> dict[str, Any]:
    """The placement fields of ``hardware``, with ``values``' where they are on it."""
    if hardware not in ON_HARDWARE:
        raise ValueError(
            f"expected the hardware as one of {', '.join(HARDWARE)}, found {brief(hardware)}"
        )
    own = values if values.get("hardware", "gpu") == hardware else {}
    placement = {field.name for field in dataclasses.fields(Placement)}
    return {**ON_HARDWARE[hardware], **{k: v for k, v in own.items() if k in placement}}


def recipe_name(text: str) -> str:
    """``--preset``'s value: a preset's name, or a recipe file's path (for argparse)."""
    try:
        recipe_values(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def apply_preset(parser: argparse.ArgumentParser, argv: list[str] | None, step: type) -> None:
    """Make ``--preset NAME`` (or a recipe file) in ``argv`` set ``parser``'s defaults for
    ``step``'s schema."""
    parser.add_argument(
        "--preset",
        type=recipe_name,
        default=None,
        metavar="NAME|FILE.yaml",
        help="named settings or a recipe file, overridden by explicit flags (default: "
        "baseline, the schema's defaults): "
        + "; ".join(f"{name}: {schema.pick(step, values)}" for name, values in PRESETS.items()),
    )
    known, _ = parser.parse_known_args(argv)
    if known.preset:
        parser.set_defaults(**schema.pick(step, recipe_values(known.preset)))
