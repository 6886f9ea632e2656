"""Write files and directories so that readers see them complete or not at all."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

MARKER = ".dogs-vs-cats-output.json"  # which step wrote a directory, and which files


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


def check_replaceable(path: Path, step: str) -> None:
    """Refuse to replace a directory unless it is empty or ``step``'s own untouched output.

    Raises:
        FileExistsError: ``path`` is a file, was not written by ``step``, or holds
            files that ``step`` did not write.
    """
    if not path.exists():
        return
    if not path.is_dir():
        raise FileExistsError(f"expected an output directory at {path}, found a file")
    present = _files_under(path)
    if not present:
        return
    written = _marker(path)
    if written.get("step") != step:
        raise FileExistsError(
            f"refusing to replace {path}: it was not written by the {step} step (no "
            f"{MARKER} of that step in it); choose an empty or new output directory"
        )
    foreign = sorted(present - set(written.get("files", [])) - {MARKER})
    if foreign:
        raise FileExistsError(
            f"refusing to replace {path}: it holds files the {step} step did not write: "
            f"{', '.join(foreign[:5])}{' …' if len(foreign) > 5 else ''}; move them first"
        )


def claim_directory(path: Path, step: str, files: list[str]) -> None:
    """Make ``path`` the output of ``step``, which then writes ``files`` into it one by one.

    A missing or empty directory, or one that ``step`` claimed before and that holds
    only those files, is claimed: its marker records them. Temporary files that a
    killed run left while writing them are removed.

    Raises:
        FileExistsError: as ``check_replaceable``: ``path`` holds what ``step`` did not write.
    """
    path = Path(path)
    if _marker(path).get("step") == step:
        for name in files:
            for abandoned in path.glob(f".{name}.*.tmp"):
                abandoned.unlink(missing_ok=True)
    check_replaceable(path, step)
    path.mkdir(parents=True, exist_ok=True)
    write_json(path / MARKER, {"step": step, "files": sorted(files)})


@contextlib.contextmanager
def atomic_directory(path: Path, step: str) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``, then swap it into place on success.

    An existing ``path`` (empty, or ``step``'s own earlier output) is replaced whole;
    on failure it is left as it was and the temporary directory is removed. Staging
    folders that a killed run of this step left beside ``path`` are removed first.
    """
    path = Path(path)
    check_replaceable(path, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_staging(path)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    )
    staging.chmod(0o755)
    try:
        yield staging
        write_json(staging / MARKER, {"step": step, "files": sorted(_files_under(staging))})
        _swap_into_place(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _marker(path: Path) -> dict:
    """What the marker in ``path`` records: the step and its files; {} without one."""
    marker = path / MARKER
    try:
        recorded = json.loads(marker.read_text()) if marker.is_file() else {}
    except ValueError:
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _files_under(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if not p.is_dir()}


def _remove_abandoned_staging(path: Path) -> None:
    """Remove ``.NAME.PID.*.tmp`` and ``.NAME.old-PID`` siblings whose process is gone."""
    for sibling in path.parent.glob(f".{path.name}.*"):
        name = sibling.name.removeprefix(f".{path.name}.")
        pid = name.split(".")[0] if name.endswith(".tmp") else name.removeprefix("old-")
        if sibling.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(sibling, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _swap_into_place(staging: Path, path: Path) -> None:
    if not path.exists():
        os.rename(staging, path)
        return
    retired = path.with_name(f".{path.name}.old-{os.getpid()}")
    os.rename(path, retired)
    os.rename(staging, path)
    shutil.rmtree(retired, ignore_errors=True)
