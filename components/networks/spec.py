"""A trained net's spec, what model.pt holds beside its weights: the net's name, the
photos it takes, its normalisation and views. ``spec.json`` holds it too, so that a
scorer of the ONNX graph can check the graph against it without loading torch."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from components.core.atomic import atomic_file
from components.core.identity import sha256_of_bytes
from components.core.names import SPEC_FILE
from components.data.arrays import check_image_spec

MOST_SPEC_BYTES = 64 * 1024  # a spec is a few hundred bytes


def check_spec(spec: object, source: Path | str) -> dict[str, Any]:
    """``spec`` checked, with the view flags a spec saved before them lacks set off.

    Raises:
        ValueError: a field outside the data contract, or no net name or view flags.
    """
    check_image_spec(spec, source)
    assert isinstance(spec, dict)  # check_image_spec refuses anything else
    mirror_average = spec.setdefault("mirror_average", False)
    shift_average = spec.setdefault("shift_average", False)
    flags = (mirror_average, shift_average)
    if not isinstance(spec.get("model"), str) or not all(isinstance(f, bool) for f in flags):
        raise ValueError(
            f"expected a model name and mirror_average and shift_average flags in {source}, "
            f"found {spec.get('model')!r:.100}, {mirror_average!r:.100} and {shift_average!r:.100}"
        )
    return spec


def write_spec(folder: Path, spec: dict[str, Any]) -> str:
    """Write ``spec`` to ``folder/spec.json`` atomically; the sha256 of the bytes written."""
    data = (json.dumps(spec, indent=2, sort_keys=True) + "\n").encode()
    with atomic_file(folder / SPEC_FILE) as handle:
        handle.write(data)
    return sha256_of_bytes(data)


def read_spec(path: Path) -> dict[str, Any]:
    """The spec in ``path``, checked (``check_spec``).

    Raises:
        ValueError: not a JSON spec of at most ``MOST_SPEC_BYTES``, or one outside the data
            contract.
    """
    with open(path, "rb") as handle:
        data = handle.read(MOST_SPEC_BYTES + 1)
    if len(data) > MOST_SPEC_BYTES:
        raise ValueError(
            f"expected a spec of at most {MOST_SPEC_BYTES} bytes in {path}, found more"
        )
    try:
        spec = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"expected a JSON spec in {path}, found other bytes ({err})") from err
    return check_spec(spec, path)
