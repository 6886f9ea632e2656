"""Write files and directories so that readers see them complete or not at all."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

OUTPUT_MARKERS = ("download.json", "meta.json", "model.pt")


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "wb") -> Iterator:
    """Open a temporary file beside ``path``; rename it over ``path`` only on success."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.chmod(tmp, 0o644)
    try:
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, payload: object) -> None:
    """Write ``payload`` as indented JSON, atomically."""
    with atomic_file(path, "w") as handle:
        json.dump(payload, handle, indent=2, sort_keys=True)
        handle.write("\n")


def check_replaceable(path: Path) -> None:
    """Refuse to overwrite a directory that is neither empty nor one of our outputs."""
    if not path.exists():
        return
    if not path.is_dir():
        raise FileExistsError(f"expected an output directory at {path}, found a file")
    if any(path.iterdir()) and not any((path / m).exists() for m in OUTPUT_MARKERS):
        raise FileExistsError(
            f"refusing to replace {path}: it is not empty and holds none of "
            f"{', '.join(OUTPUT_MARKERS)}; choose an empty or new output directory"
        )


@contextlib.contextmanager
def atomic_directory(path: Path) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``, then swap it into place on success.

    An existing ``path`` (empty, or a previous output of ours) is replaced whole;
    on failure it is left as it was and the temporary directory is removed.
    """
    path = Path(path)
    check_replaceable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    staging.chmod(0o755)
    try:
        yield staging
        _swap_into_place(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap_into_place(staging: Path, path: Path) -> None:
    if not path.exists():
        os.rename(staging, path)
        return
    retired = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.rename(path, retired)
    os.rename(staging, path)
    shutil.rmtree(retired, ignore_errors=True)
