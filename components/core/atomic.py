"""Write files and directories so that readers see them complete or not at all."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MARKER = ".dogs-vs-cats-output.json"  # which step wrote a directory, and which files
STAGING = ".dogs-vs-cats-staging.json"  # in a staging folder: the step and the output it is for
LOCK = ".dogs-vs-cats-output.lock"  # held while a step writes into its output
RETIRED = ".dogs-vs-cats-retired.json"  # in an output being replaced: which run moved it


@contextlib.contextmanager
def atomic_file(path: Path, mode: str = "wb") -> Iterator[Any]:
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

    The walk stops at the first entry ``step`` did not write, so a home folder is refused
    at once, and a folder that cannot be read counts as holding what was not written.

    Raises:
        FileExistsError: ``path`` is a file, was not written by ``step``, or holds
            anything (a file, a link, a folder) that ``step`` did not write.
    """
    path = Path(os.path.abspath(path))
    if not path.exists() and not path.is_symlink():
        return
    if path.is_symlink() or not path.is_dir():
        raise FileExistsError(f"expected an output directory at {path}, found a file or link")
    written = _marker(path)
    if written.get("step") != step:
        if _holds_anything(path):
            raise FileExistsError(
                f"refusing to replace {path}: it was not written by the {step} step (no "
                f"{MARKER} of that step in it); choose an empty or new output directory"
            )
        return
    listed = {*written.get("files", []), MARKER, LOCK, RETIRED}
    foreign = next((entry for entry in _entries(path) if entry not in listed), None)
    if foreign is not None:
        raise FileExistsError(
            f"refusing to replace {path}: it holds what the {step} step did not write: "
            f"{foreign}; move it first"
        )


def claim_directory(path: Path, step: str, files: list[str]) -> None:
    """Make ``path`` the output of ``step``, which then writes ``files`` into it one by one.

    A missing or empty directory, or one that ``step`` claimed before and that holds
    only those files, is claimed: its marker records them. Temporary files that a
    killed run left while writing them are removed.

    Raises:
        FileExistsError: as ``check_replaceable``: ``path`` holds what ``step`` did not write.
    """
    path = Path(os.path.abspath(path))
    if _marker(path).get("step") == step:
        for name in files:
            for abandoned in path.glob(f".{name}.*.tmp"):
                abandoned.unlink(missing_ok=True)
    check_replaceable(path, step)
    path.mkdir(parents=True, exist_ok=True)
    write_json(path / MARKER, {"step": step, "files": sorted(files)})


@contextlib.contextmanager
def exclusive(path: Path, step: str) -> Iterator[None]:
    """Hold ``path`` for this process while ``step`` writes into it; a second is refused.

    Raises:
        FileExistsError: ``path`` holds what ``step`` did not write, or another process
            holds it now.
    """
    path = Path(os.path.abspath(path))
    if _marker(path).get("step") != step:  # no lock file goes into a foreign folder
        check_replaceable(path, step)
    created = not path.exists()
    path.mkdir(parents=True, exist_ok=True)
    with open(path / LOCK, "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FileExistsError(
                f"refusing to write into {path}: another {step} run is writing into it now; "
                "wait for it, or choose another output directory"
            ) from None
        try:
            yield
        finally:
            if all(entry in (MARKER, LOCK) for entry in _entries(path)):
                # nothing was written (a server that did not answer, a refused checkpoint):
                # nothing is left, not even the claim
                (path / MARKER).unlink(missing_ok=True)
                (path / LOCK).unlink(missing_ok=True)
                if created:
                    with contextlib.suppress(OSError):
                        path.rmdir()
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def atomic_directory(path: Path, step: str) -> Iterator[Path]:
    """Yield a temporary sibling of ``path``, then swap it into place on success.

    An existing ``path`` (empty, or ``step``'s own earlier output) is replaced whole;
    on failure it is left as it was and the temporary directory is removed. Staging
    folders that a killed run of this step left beside ``path`` are removed first.
    """
    path = Path(os.path.abspath(path))  # "." has a name, and a link is not followed
    check_replaceable(path, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned_staging(path, step)
    staging = Path(
        tempfile.mkdtemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    )
    staging.chmod(0o755)
    try:
        write_json(staging / STAGING, leftover_record(staging, step, path))
        yield staging
        (staging / STAGING).unlink()
        write_json(staging / MARKER, {"step": step, "files": sorted(_entries(staging))})
        _swap_into_place(staging, path)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _marker(path: Path) -> dict[str, Any]:
    """What the marker in ``path`` records: the step and its files; {} without one."""
    return _read_record(path / MARKER)


def _read_record(record: Path) -> dict[str, Any]:
    """A JSON object written by this module; {} for anything else."""
    try:
        recorded = json.loads(record.read_text()) if record.is_file() else {}
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def _holds_anything(path: Path) -> bool:
    """Whether ``path`` holds an entry besides a lock (unreadable: it may hold anything)."""
    try:
        with os.scandir(path) as scan:
            return any(entry.name != LOCK for entry in scan)
    except OSError:
        return True


def _entries(path: Path) -> Iterator[str]:
    """What ``path`` holds, lazily: each file or link, and each folder that holds nothing.

    A folder that cannot be read is yielded as it is: whatever it holds was not listed.
    """
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as scan:
                children = list(scan)
        except OSError:
            yield str(folder.relative_to(path)) + "/"
            continue
        if not children and folder != path:
            yield str(folder.relative_to(path)) + "/"
        for child in children:
            if child.is_dir(follow_symlinks=False):
                stack.append(Path(child.path))
            else:
                yield str(Path(child.path).relative_to(path))


def leftover_record(folder: Path, step: str, output: Path) -> dict[str, Any]:
    """What marks ``folder`` as this run's own leftover: the step, the output it is for,
    and the folder's identity on disk, which a copy or a look-alike does not share."""
    found = folder.stat()
    return {"step": step, "output": str(output.resolve()), "identity": [found.st_dev, found.st_ino]}


def _remove_abandoned_staging(path: Path, step: str) -> None:
    """Remove what a killed run of ``step`` left beside ``path``, and nothing else.

    A ``.NAME.PID.*.tmp`` staging folder, or a ``.NAME.old-PID`` output being replaced,
    is removed only when its record (written by that run) names this step and ``path``
    and the very folder it is in (a user's copy of it is another folder), and only once
    its process is gone.
    """
    for sibling in path.parent.glob(f".{path.name}.*"):
        name = sibling.name.removeprefix(f".{path.name}.")
        staging = name.endswith(".tmp")
        pid = name.split(".")[0] if staging else name.removeprefix("old-")
        if sibling.is_symlink() or not sibling.is_dir() or not pid.isdigit() or _alive(int(pid)):
            continue
        record = _read_record(sibling / (STAGING if staging else RETIRED))
        if record and record == leftover_record(sibling, step, path):
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
    write_json(path / RETIRED, leftover_record(path, _marker(path).get("step", ""), path))
    try:
        os.rename(path, retired)
    except BaseException:
        (path / RETIRED).unlink(missing_ok=True)
        raise
    os.rename(staging, path)
    shutil.rmtree(retired, ignore_errors=True)
