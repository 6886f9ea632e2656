"""Where a recipe trains on a cluster: the train task's placement flags of compile, submit
and tune, each defaulting to the recipe's (``components.recipes.presets``)."""

import argparse
import dataclasses

from components.cluster.placement import Placement
from components.core import schema
from components.recipes.recipe import Recipe


def add_placement_flags(parser: argparse.ArgumentParser, shown: Recipe) -> None:
    """One flag per ``Placement`` field, unset unless given: the recipe decides the rest;
    the help shows ``shown``'s values."""
    group = parser.add_argument_group(
        f"where the train task runs (default: the recipe's; shown: {shown.name}'s)"
    )
    schema.add_arguments(group, Placement, shown=dataclasses.asdict(shown.placement()))


def placement_from(args: argparse.Namespace, recipe: Recipe) -> Placement:
    """``recipe``'s placement, the flags given in ``args`` over it.

    Raises:
        ValueError: a value ``Placement`` refuses.
    """
    explicit = {
        field.name: getattr(args, field.name)
        for field in dataclasses.fields(Placement)
        if getattr(args, field.name) is not None
    }
    return recipe.placement(explicit)
