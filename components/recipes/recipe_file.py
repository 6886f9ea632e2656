"""A recipe file read as bounded data: a regular file of at most 64 KiB holding one YAML
mapping, with no anchors, aliases or merge keys (the bombs that grow a few hundred bytes
into gigabytes) and nesting at most ``MOST_DEPTH`` deep, checked event by event before
anything is built from it, and each key once (YAML's own rule, which PyYAML leaves to the
reader: the last would win unseen)."""

from __future__ import annotations

import os
import stat
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from components.core.errors import brief, printable

MOST_RECIPE_BYTES = 64 * 1024
MOST_DEPTH = 3  # a mapping of settings, a value that is (wrongly) a list, one more
MERGE_KEY = "<<"


def read_mapping(path: Path) -> dict[Any, Any]:
    """The mapping the YAML file at ``path`` holds.

    Raises:
        ValueError: not a readable regular file, over 64 KiB, not UTF-8 YAML, an anchor,
            alias or merge key, nesting too deep, or not a mapping; in one line.
    """
    text = _read_text(path)
    try:
        _check_plain(yaml.parse(text))
        raw = yaml.load(text, Loader=_UniqueKeysLoader)  # noqa: S506 - a SafeLoader
    except yaml.MarkedYAMLError as err:
        raise ValueError(f"expected YAML settings (name: value), found {_problem(err)}") from None
    except (yaml.YAMLError, ValueError) as err:  # a number over Python's digit limit
        raise ValueError(f"expected YAML settings (name: value), found {err}") from None
    if not isinstance(raw, dict):
        raise ValueError(f"expected YAML settings (name: value), found {brief(raw)}")
    return raw


def _read_text(path: Path) -> str:
    """The file's text: opened without waiting (a FIFO would block), regular files only."""
    shown = printable(str(path))
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise ValueError(
                    f"expected a recipe file, found {shown}, which is not a regular file"
                )
            data = os.read(descriptor, MOST_RECIPE_BYTES + 1)
        finally:
            os.close(descriptor)
    except OSError as err:  # missing, unreadable, or a kernel file that refuses a read
        raise ValueError(
            f"expected a readable recipe file, found {shown}: {err.strerror}"
        ) from None
    if len(data) > MOST_RECIPE_BYTES:
        raise ValueError(
            f"expected a recipe file of at most {MOST_RECIPE_BYTES // 1024} KiB, found {shown} "
            "larger"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"expected a recipe file in UTF-8, found {shown} not") from None


class _UniqueKeysLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key given twice in one mapping."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[object] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    problem=f"{brief(key)} given twice", problem_mark=key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _check_plain(events: Any) -> None:
    """Refuse anchors, aliases, merge keys and deep nesting, before any node is built."""
    depth = 0
    for event in events:
        where = f"at line {event.start_mark.line + 1}"
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
            raise ValueError(f"expected plain settings, found a YAML anchor or alias {where}")
        if isinstance(event, yaml.ScalarEvent) and event.value == MERGE_KEY and event.style is None:
            raise ValueError(f"expected plain settings, found a YAML merge key (<<) {where}")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MOST_DEPTH:
                raise ValueError(
                    f"expected settings nested at most {MOST_DEPTH} deep, found deeper {where}"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _problem(err: yaml.MarkedYAMLError) -> str:
    """A parser's complaint and where: ``could not find expected ':' at line 3, column 1``."""
    mark = err.problem_mark or err.context_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return f"{err.problem or err.context}{where}"
