"""One schema per step: a frozen dataclass whose fields say everything about a setting.

Each field is declared once with :func:`setting`, and its name, type, default, help,
choices and role drive, from this one place:

- the step's command-line flags (``--epochs``; ``--no-augment``, helped as "turn off: …",
  for a default-on bool),
- the pipeline's parameters and their defaults (fields whose role is not ``LOCAL``),
- the MLflow params of a run (``RECIPE`` fields: what defines the result),
- the inputs of the step's KFP component: one typed input per pipeline field, so KFP
  shows each and hands it over as it was given (``tests/pipeline/test_ops.py`` holds
  each component's inputs to its schema).

Roles:
    RECIPE: defines the result (model, epochs, image size …): a flag, a pipeline
        parameter and an MLflow param.
    PER_RUN: chosen per run but does not change the result (the experiment's name, the
        data's source): a flag and a pipeline parameter.
    LOCAL: where and how this process runs (paths, device, resume): a flag only.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from components.core.errors import brief

RECIPE, PER_RUN, LOCAL = "recipe", "per_run", "local"
PIPELINE_ROLES = (RECIPE, PER_RUN)  # the roles a pipeline parameter has
T = TypeVar("T")
_TRUE, _FALSE = {"true", "1", "yes"}, {"false", "0", "no"}


def setting(
    default: Any = dataclasses.MISSING,
    help: str = "",
    *,
    role: str = RECIPE,
    choices: Iterable[Any] | None = None,
    example: Any = None,
) -> Any:
    """A dataclass field with what the flag, the pipeline parameter and MLflow need.

    ``example``: for a required field whose empty value the schema refuses, a valid
    value to check the other settings with before the run knows the real one.
    """
    metadata = {
        "help": help,
        "role": role,
        "choices": tuple(choices) if choices is not None else None,
        "example": example,
    }
    return dataclasses.field(default=default, metadata=metadata)


def fields_of(schema: type, *roles: str) -> list[dataclasses.Field[Any]]:
    """The schema's fields, in declaration order, of the given roles (all when none given)."""
    return [
        field
        for field in dataclasses.fields(schema)
        if not roles or field.metadata.get("role", LOCAL) in roles
    ]


def field_type(schema: type, field: dataclasses.Field[Any]) -> type:
    """The field's plain type: ``int`` for ``int``, ``str`` for ``str | None``."""
    hint = typing.get_type_hints(schema)[field.name]
    if isinstance(hint, types.UnionType):
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    return cast(type, hint)


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    schema: type,
    shown: Mapping[str, Any] | None = None,
) -> None:
    """One flag per field: help with the default, choices, ``--no-X`` for a default-on bool.

    With ``shown`` (values by field name), a flag not given is left None, for the caller to
    fill in from elsewhere (a preset), and its help shows ``shown``'s value as the default.
    """
    for field in fields_of(schema):
        kind = field_type(schema, field)
        meta = field.metadata
        required = field.default is dataclasses.MISSING
        text = meta["help"].replace("%", "%%")  # argparse formats help with %
        if kind is bool:  # the default as the parser holds it: a preset may set it
            on = field.default is True
            parser.add_argument(
                flag(f"no_{field.name}" if on else field.name),
                dest=field.name,
                action="store_false" if on else "store_true",
                help=f"turn off: {text} (default: %(default)s)"
                if on
                else f"{text} (default: %(default)s)",
            )
            continue
        default = None if required else field.default
        if shown is None:
            told = None if default is None else "%(default)s"  # what a preset set, if any
        else:  # left unset for the caller to fill in; the help shows ``shown``'s value
            default, value = None, shown[field.name]
            told = None if value is None else str(value).replace("%", "%%")
        said = "" if told is None else f" (default: {told})"
        parser.add_argument(
            flag(field.name),
            dest=field.name,
            type=kind,
            required=required,
            default=default,
            choices=meta.get("choices"),
            help=f"{text}{said}",
        )
    if isinstance(parser, argparse.ArgumentParser):
        parser.usage = short_usage(schema)


def short_usage(schema: type) -> str:
    """A usage line of the required flags alone: a refusal stays a few lines long, and
    ``--help`` lists the rest."""
    required = [
        f"{flag(field.name)} {field.name.upper()}"
        for field in fields_of(schema)
        if field.default is dataclasses.MISSING
    ]
    return " ".join(["%(prog)s", *required, "[options]  (--help lists them)"])


def from_namespace(schema: type[T], namespace: argparse.Namespace) -> T:
    """The schema instance that a parsed command line describes.

    Raises:
        SystemExit: the schema refuses a value; its message is the command's one line of
            error, not a traceback.
    """
    try:
        return schema(**{field.name: getattr(namespace, field.name) for field in fields_of(schema)})
    except ValueError as err:
        raise SystemExit(f"error: {err}") from None


def to_argv(config: Any) -> list[str]:
    """The command line that rebuilds ``config``: how torchrun and cluster pods get it."""
    argv: list[str] = []
    for field in fields_of(type(config)):
        value = getattr(config, field.name)
        if isinstance(value, bool):
            if value != field.default:
                argv.append(flag(f"no_{field.name}" if field.default is True else field.name))
        elif value is not None:  # one word: a value that starts with "-" is not a flag
            argv.append(f"{flag(field.name)}={value}")
    return argv


def params(config: Any) -> dict[str, Any]:
    """The ``RECIPE`` fields of ``config``, by name: what its MLflow run logs as params."""
    return {field.name: getattr(config, field.name) for field in fields_of(type(config), RECIPE)}


def pick(schema: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """The entries of ``values`` that name a pipeline field of ``schema``."""
    return {
        field.name: values[field.name]
        for field in fields_of(schema, *PIPELINE_ROLES)
        if field.name in values
    }


def build(schema: type[T], values: Mapping[str, Any]) -> T:
    """``schema`` built from ``values``, its defaults for the rest, and for a required field
    not given its example (else its type's empty value): to check settings before the run
    knows what a step learns at run time.

    Raises:
        ValueError: what ``schema`` refuses.
    """
    given = {}
    for field in dataclasses.fields(schema):  # type: ignore[arg-type]
        if field.name in values:
            given[field.name] = values[field.name]
        elif field.default is dataclasses.MISSING:
            example = field.metadata.get("example")
            given[field.name] = field_type(schema, field)() if example is None else example
    return schema(**given)


def decode(schema: type, text: str, names: Sequence[str]) -> dict[str, Any]:
    """A JSON object of some of ``schema``'s fields (``names``), each as its field's type.

    Raises:
        ValueError: ``text`` is not a JSON object, names a field outside ``names``, or
            holds a value that does not convert to its field's type.
    """
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"expected a JSON object of {schema.__name__} settings: {err}") from err
    if not isinstance(raw, dict):
        raise ValueError(f"expected a JSON object of {schema.__name__} settings, found {text!r}")
    known = {field.name: field for field in fields_of(schema) if field.name in names}
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ValueError(
            f"unknown {schema.__name__} settings {unknown}; expected some of: {', '.join(known)}"
        )
    return {
        name: convert(field_type(schema, known[name]), value, name) for name, value in raw.items()
    }


def convert(kind: type, value: Any, name: str = "value") -> Any:
    """``value`` (often a string) as ``kind``: ``"5.0"`` -> 5, ``"false"`` -> False."""
    if value is None or isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
        return value
    text = str(value).strip()
    if kind is bool:
        if text.lower() in _TRUE | _FALSE:
            return text.lower() in _TRUE
    elif kind is int:
        number = float(text) if _is_number(text) else None
        if number is not None and number.is_integer():
            return int(number)
    elif kind is float and _is_number(text):
        return float(text)
    elif kind is str:
        return text
    raise ValueError(f"expected {name} to be {kind.__name__}, found {brief(value)}")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def signature_parameters(schemas: Sequence[type], *roles: str) -> dict[str, tuple[type, Any]]:
    """``{name: (type, default)}`` over several schemas; a name they share must agree.

    Raises:
        ValueError: two schemas declare one name with different types or defaults.
    """
    merged: dict[str, tuple[type, Any]] = {}
    for schema in schemas:
        for field in fields_of(schema, *roles):
            entry = (field_type(schema, field), field.default)
            if merged.setdefault(field.name, entry) != entry:
                raise ValueError(
                    f"{field.name} is {merged[field.name]} in one schema and {entry} in "
                    f"{schema.__name__}; a shared setting needs one type and one default"
                )
    return merged


def descriptions(schemas: Sequence[type], *roles: str) -> dict[str, str]:
    """``{name: help}`` over several schemas, a field with choices naming them."""
    described: dict[str, str] = {}
    for schema in schemas:
        for field in fields_of(schema, *roles):
            choices = field.metadata.get("choices")
            text = field.metadata["help"]
            if choices:
                text += f" (one of: {', '.join(map(str, choices))})"
            described.setdefault(field.name, text)
    return described


def check_seed(seed: int, name: str) -> None:
    """Refuse a seed that torch and numpy cannot both take: 0 to 2**32 - 1."""
    if not 0 <= seed < 2**32:
        raise ValueError(f"expected {name} from 0 to {2**32 - 1}, found {seed}")
