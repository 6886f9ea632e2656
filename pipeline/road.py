"""Where a recipe trains on a cluster: the train task's placement flags of compile, submit
and tune, each defaulting to the preset's (``components.recipes.presets``)."""

import argparse
import dataclasses

from components.cluster.placement import Placement
from components.core import schema
from components.recipes.recipe import placement_of, recipe_values

BASELINE = "baseline"  # the recipe without --preset: the schemas' defaults


def add_placement_flags(parser: argparse.ArgumentParser, shown_preset: str) -> None:
    """One flag per ``Placement`` field, unset unless given: the preset decides the rest;
    the help shows ``shown_preset``'s values."""
    group = parser.add_argument_group(
        f"where the train task runs (default: the preset's; shown: the {shown_preset} preset's)"
    )
    shown = placement_of(recipe_values(shown_preset), {})
    schema.add_arguments(group, Placement, shown=dataclasses.asdict(shown))


def placement_from(args: argparse.Namespace) -> Placement:
    """The preset's placement (``args.preset``, else the baseline's), the flags given over it.

    Raises:
        ValueError: a value ``Placement`` refuses.
    """
    explicit = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(Placement)
        if getattr(args, field.name) is not None
    }
    return placement_of(recipe_values(args.preset or BASELINE), explicit)
