"""A recipe by name (a preset) or as a file, checked against the schemas it sets.

A recipe file is YAML: settings by field name, as a preset holds them, and optionally
``preset: NAME``, the named recipe it starts from (``DEFAULT_PRESET`` without it, so that
a file's placement is always a preset's). A command resolves its recipe once
(``load_recipe``, ``preset_in``) and hands the ``Recipe`` down. It is read as bounded data
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
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.cluster.placement import HARDWARE, Placement
from components.core import schema
from components.core.errors import brief, printable
from components.preprocessing.config import PreprocessConfig
from components.recipes.presets import (
    DEFAULT_PRESET,
    DEFAULTS_SAID,
    ON_CPU,
    ON_GPU,
    PRESETS,
    PURPOSES,
)
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


@dataclass(frozen=True)
class Recipe:
    """A recipe resolved once per command, then handed down: its name (a preset's, or a
    recipe file's path) and its settings, checked."""

    name: str
    values: dict[str, Any]

    @property
    def label(self) -> str:
        """How runs name it: the preset's name, or the recipe file's own name."""
        return Path(self.name).name

    def placement(self, explicit: dict[str, Any] | None = None) -> Placement:
        """Where it trains: its hardware's placement, its own fields over it, ``explicit``
        flags over both."""
        return placement_of(self.values, explicit or {})


def load_recipe(name: str | None = None) -> Recipe:
    """Preset ``name``, or the recipe file at ``name`` (``*.yaml``); ``DEFAULT_PRESET``
    without one.

    Raises:
        ValueError: as ``recipe_values``.
    """
    name = name or DEFAULT_PRESET
    return Recipe(name, recipe_values(name))


def recipe_values(name: str) -> dict[str, Any]:
    """The settings of preset ``name``, or of the recipe file at ``name`` (``*.yaml``).

    Raises:
        ValueError: an unknown preset, or a file that is missing, too big, not YAML, or
            sets a setting the schemas refuse; in one line naming the file and the field.
    """
    if name.endswith(RECIPE_SUFFIXES):
        return read_recipe(Path(name))
    if name not in PRESETS:
        close = difflib.get_close_matches(name[:100], PRESETS, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ValueError(
            f"unknown preset {brief(name)}; {hint}expected one of: {', '.join(PRESETS)}, or a "
            "recipe file NAME.yaml"
        )
    return dict(PRESETS[name])


def read_recipe(path: Path) -> dict[str, Any]:
    """A recipe file's settings over those of the preset it names (``DEFAULT_PRESET``
    where it names none), checked together: a setting is judged with the preset's others
    beside it."""
    shown = printable(str(path))  # a name's escape sequences cannot forge a line
    try:
        settings = read_mapping(path)
    except ValueError as err:
        raise ValueError(f"{shown}: {err}") from None
    base = settings.pop(BASE, DEFAULT_PRESET)
    if not (isinstance(base, str) and base in PRESETS):
        raise ValueError(
            f"{shown}: expected {BASE}: one of {', '.join(PRESETS)} (the recipe it starts "
            f"from; without it: {DEFAULT_PRESET}), found {brief(base)}"
        )
    start = dict(PRESETS[base])
    try:
        if "hardware" in settings:  # a file that moves the recipe takes that hardware's placement
            hardware = check_recipe({"hardware": settings["hardware"]})["hardware"]
            start = {**start, **_placement_for(hardware, start)}
        return check_recipe({**start, **settings})
    except ValueError as err:
        raise ValueError(f"{shown}: {err}") from None


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
    hardware = explicit.get("hardware", values.get("hardware", Placement.hardware))
    return Placement(**{**_placement_for(hardware, values), **explicit})


def _placement_for(hardware: str, values: dict[str, Any]) -> dict[str, Any]:
    """The placement fields of ``hardware``, with ``values``' where they are on it."""
    if hardware not in ON_HARDWARE:
        raise ValueError(
            f"expected the hardware as one of {', '.join(HARDWARE)}, found {brief(hardware)}"
        )
    own = values if values.get("hardware", Placement.hardware) == hardware else {}
    placement = {field.name for field in dataclasses.fields(Placement)}
    return {**ON_HARDWARE[hardware], **{k: v for k, v in own.items() if k in placement}}


def recipe_argument(text: str) -> Recipe:
    """``--preset``'s value, resolved: a preset's name, or a recipe file's path (for
    argparse)."""
    try:
        return load_recipe(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def presets_table() -> str:
    """The presets by name, each with its purpose: what ``--help`` shows of them."""
    width = max(map(len, PRESETS))
    return "\n".join(f"  {name:<{width}}  {PURPOSES[name]}" for name in PRESETS)


def preset_in(argv: list[str] | None, prog: str) -> Recipe | None:
    """The recipe ``--preset`` names in ``argv``, resolved; None without one.

    Raises:
        SystemExit: a preset or recipe file that is refused: a short usage and the reason.
    """
    reader = argparse.ArgumentParser(
        prog=prog, add_help=False, usage="%(prog)s [--preset NAME|FILE.yaml] [options]"
    )
    reader.add_argument("--preset", type=recipe_argument, default=None)
    known, _ = reader.parse_known_args(argv)
    preset: Recipe | None = known.preset
    return preset


def apply_preset(parser: argparse.ArgumentParser, argv: list[str] | None, step: type) -> None:
    """Make ``--preset NAME`` (or a recipe file) in ``argv`` set ``parser``'s defaults for
    ``step``'s schema: read once, before the flags are, so that a bad one is refused in
    two lines."""
    parser.add_argument(
        "--preset",
        default=None,
        metavar="NAME|FILE.yaml",
        help="named settings or a recipe file (preset: NAME, then settings by name), "
        f"overridden by explicit flags ({DEFAULTS_SAID}); the presets are listed below",
    )
    after = f"\n\n{textwrap.fill(parser.epilog, 88)}" if parser.epilog else ""
    parser.epilog = f"presets:\n{presets_table()}{after}"
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    recipe = preset_in(argv, parser.prog)
    if recipe:
        parser.set_defaults(**schema.pick(step, {"recipe_name": recipe.label, **recipe.values}))
