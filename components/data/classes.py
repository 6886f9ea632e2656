"""A data set's classes: their names, their limits, and the names MLflow keys take.

The class folders of a photo set are its classes, in sorted order, as torchvision's
``ImageFolder`` orders them: label ``i`` is the ``i``-th name. PetImages's ``Cat`` and
``Dog`` are ``cat`` and ``dog``, as the tutorial and Kaggle name them.
"""

from __future__ import annotations

import re

MIN_CLASSES = 2
MAX_CLASSES = 100  # every class a column of the confusion matrix, a line of the card
MAX_CLASS_NAME = 50  # characters: the names, as JSON, fit one MLflow param (6,000)
SEPARATORS = ("/", "\\")
MLFLOW_KEY_UNSAFE = re.compile(r"[^\w\-. ]")  # what an MLflow metric or param key refuses


def class_name_problem(name: object) -> str | None:
    """Why ``name`` cannot name a class, or None where it can."""
    if not isinstance(name, str):
        return f"a string, found {type(name).__name__}"
    if not name or len(name) > MAX_CLASS_NAME:
        return f"1 to {MAX_CLASS_NAME} characters, found {len(name)} in {name[:60]!r}"
    if not name.isprintable() or any(sep in name for sep in SEPARATORS) or name in (".", ".."):
        return f"printable characters without / or \\, found {name[:60]!r}"
    if name != name.strip():
        return f"no space at either end, found {name!r}"
    return None


def check_classes(classes: object, source: object) -> tuple[str, ...]:
    """``classes`` as a tuple, where it is a list of 2 to 100 distinct names, each 1 to 50
    printable characters without a path separator.

    Raises:
        ValueError: naming ``source``, the limits and the first name outside them.
    """
    if not isinstance(classes, (list, tuple)):
        raise ValueError(
            f"expected a list of class names in {source}, found {type(classes).__name__}"
        )
    if not MIN_CLASSES <= len(classes) <= MAX_CLASSES:
        raise ValueError(
            f"expected {MIN_CLASSES} to {MAX_CLASSES} classes in {source}, found "
            f"{len(classes)}: {', '.join(map(str, classes[:5]))[:200]}"
        )
    for name in classes:
        problem = class_name_problem(name)
        if problem:
            raise ValueError(f"expected class names of {problem} in {source}")
    if len(set(classes)) != len(classes):
        twice = sorted({name for name in classes if classes.count(name) > 1})
        raise ValueError(f"expected distinct class names in {source}, found {twice} twice")
    return tuple(classes)


def metric_keys(classes: tuple[str, ...] | list[str]) -> list[str]:
    """Each class's name as an MLflow key takes it: characters MLflow refuses become ``_``,
    and a name that then meets another's gets its label after it (``a_b``, ``a_b_2``)."""
    keys: list[str] = []
    for label, name in enumerate(classes):
        key = MLFLOW_KEY_UNSAFE.sub("_", name)
        while key in keys:
            key = f"{key}_{label}"
        keys.append(key)
    return keys
