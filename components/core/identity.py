"""A trained model's identity: the sha256 of every file that can answer for it.

The train step digests the weights (``model.pt``) and their spec (``spec.json``), the
float graph (``model.onnx``) and the int8 graph (``model.int8.onnx``) from the bytes it
wrote, and every file of the
MLflow model it logged. The digests go into the tracking store, as a tag of the logged
model (MLflow's ``model_id``), out of reach of whoever can write the artifact store, and
into ``identity.json`` beside the files. Every loader checks the files it would read
against a record before the first answer, and refuses a mismatch in one line that names
the file.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from components.core.atomic import write_json

RECORD = "identity.json"  # beside a model's files: {"sha256": {file: digest}}
SHA256 = re.compile(r"[0-9a-f]{64}")
MOST_FILES = 64  # an MLflow model holds about ten; a record of more is refused
# written into a downloaded model by MLflow's own client, not read from the store
MLFLOW_LOCAL_FILES = ("registered_model_meta",)


class ModelIdentityError(ValueError):
    """A model file is not the one its record names: changed, swapped or unrecorded."""


def sha256_of_bytes(payload: bytes) -> str:
    return hashlib.sha256(payload).hexdigest()


def sha256_of(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def folder_digests(folder: Path) -> dict[str, str]:
    """The digest of every file under ``folder`` by its path there (``data/model.pt2``),
    but the record itself and what MLflow's client writes on download."""
    skipped = {RECORD, *MLFLOW_LOCAL_FILES}
    return {
        path.relative_to(folder).as_posix(): sha256_of(path)
        for path in sorted(folder.rglob("*"))
        if path.is_file() and path.relative_to(folder).as_posix() not in skipped
    }


def write_record(folder: Path, digests: dict[str, str]) -> None:
    """``identity.json`` in ``folder``: the files' digests, written atomically."""
    write_json(folder / RECORD, {"sha256": dict(sorted(digests.items()))})


def read_record(folder: Path) -> dict[str, str]:
    """The digests ``identity.json`` in ``folder`` records.

    Raises:
        ModelIdentityError: no record, or one that is not a map of file names to sha256s.
    """
    path = folder / RECORD
    if not path.is_file() or path.is_symlink():
        raise ModelIdentityError(
            f"expected {RECORD} beside the model's files in {folder} (the train step and "
            "fetch_model write it), found none: the files cannot be checked, so they are "
            "not loaded"
        )
    try:
        payload = json.loads(path.read_bytes()[: 64 * 1024])
    except ValueError:
        payload = None
    return parse_digests(payload.get("sha256") if isinstance(payload, dict) else None, str(path))


def parse_digests(found: object, source: str) -> dict[str, str]:
    """``found`` as a record of digests, checked: file names to lowercase sha256s.

    Raises:
        ModelIdentityError: anything else.
    """
    fits = (
        isinstance(found, dict)
        and 0 < len(found) <= MOST_FILES
        and all(
            isinstance(name, str) and _is_relative(name) and isinstance(digest, str)
            for name, digest in found.items()
        )
        and all(SHA256.fullmatch(digest) for digest in found.values())
    )
    if not fits:
        raise ModelIdentityError(
            f"expected a record of file names and their sha256 digests in {source}, found "
            f"{str(found)[:200]!r}"
        )
    assert isinstance(found, dict)
    return dict(found)


def _is_relative(name: str) -> bool:
    parts = name.split("/")
    return 0 < len(name) <= 255 and all(part not in ("", ".", "..") for part in parts)


def verify(folder: Path, record: dict[str, str], reads: Iterable[str], source: str) -> None:
    """Check that every file of ``folder`` that ``record`` names is the one it names, and
    that each file a loader ``reads`` is among them.

    Raises:
        ModelIdentityError: a file changed, or a file read that no record names; the
            message names the file and ``source``, where the record was read.
    """
    for name in reads:
        if name not in record:
            raise ModelIdentityError(
                f"refusing {folder / name}: {source} records no digest of it, so it is not a "
                "file the train step wrote for this model"
            )
    for name, expected in sorted(record.items()):
        path = folder / name
        if not path.exists() and name not in reads:
            continue  # a file this loader does not read (int8 on a float model's folder)
        found = sha256_of(path) if path.is_file() and not path.is_symlink() else "nothing"
        if found != expected:
            raise ModelIdentityError(
                f"refusing {path}: its sha256 is {found[:16]}…, {source} records "
                f"{expected[:16]}…; it is not the file the train step wrote (and evaluate "
                "scored) for this model"
            )
