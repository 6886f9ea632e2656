"""Extract .zip and .tar(.gz) archives safely: no path escapes, no archive bombs."""

from __future__ import annotations

import logging
import shutil
import stat
import tarfile
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

log = logging.getLogger(__name__)


class UnsafeArchiveError(ValueError):
    """An archive entry would escape the target directory or exceed the limits."""


@dataclass(frozen=True)
class ExtractionLimits:
    """Guards against archive bombs; the defaults fit the PetImages archive (25,000 photos,
    about 0.8 GB, stored nearly uncompressed) several times over."""

    max_files: int = 100_000
    max_bytes: int = 8 * 1024**3
    max_ratio: float = 50.0  # uncompressed bytes per archive byte; JPEGs barely compress


def extract(archive: Path, target: Path, limits: ExtractionLimits = ExtractionLimits()) -> int:
    """Extract a zip or tar ``archive`` (told by content) into ``target``.

    Only regular files and folders are written, by this code and not the tarfile
    module's extraction filters, so safety does not hang on the interpreter's patch
    level (CVE-2025-4517). Links of any kind and special files are refused: a photo
    archive has no use for them.

    Returns:
        The number of files written.

    Raises:
        UnsafeArchiveError: an entry escapes ``target``, is a link or a special file, or
            the archive exceeds a limit.
        ValueError: ``archive`` is neither a zip nor a tar file.
    """
    budget = min(limits.max_bytes, int(limits.max_ratio * max(archive.stat().st_size, 1)))
    if zipfile.is_zipfile(archive):
        return _extract_zip(archive, target, limits, budget)
    if tarfile.is_tarfile(archive):
        return _extract_tar(archive, target, limits, budget)
    raise ValueError(f"expected a .zip or .tar(.gz) archive at {archive}, found neither")


def _safe_member_path(name: str, target: Path, archive: Path) -> Path:
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or name.startswith(("/", "\\")) or (pure.parts and ":" in pure.parts[0]):
        raise UnsafeArchiveError(f"refusing {archive}: entry {name!r} has an absolute path")
    if ".." in pure.parts:
        raise UnsafeArchiveError(f"refusing {archive}: entry {name!r} climbs out with '..'")
    destination = (target / pure).resolve()
    if not destination.is_relative_to(target.resolve()):
        raise UnsafeArchiveError(f"refusing {archive}: entry {name!r} lands outside {target}")
    return destination


def _check_limits(
    files: int, size: int, limits: ExtractionLimits, budget: int, archive: Path
) -> None:
    if files > limits.max_files:
        raise UnsafeArchiveError(
            f"refusing {archive}: more than {limits.max_files} files (max_files limit)"
        )
    if size > budget:
        raise UnsafeArchiveError(
            f"refusing {archive}: it declares {size} bytes uncompressed, over the {budget} "
            f"allowed (max_bytes {limits.max_bytes}, max_ratio {limits.max_ratio} × its size)"
        )


def _refuse_link(archive: Path, name: str, kind: str) -> None:
    raise UnsafeArchiveError(
        f"refusing {archive}: entry {name!r} is a {kind}; a photo archive holds only "
        "files and folders"
    )


def _extract_zip(archive: Path, target: Path, limits: ExtractionLimits, budget: int) -> int:
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        for info in members:
            _safe_member_path(info.filename, target, archive)
            if stat.S_ISLNK(info.external_attr >> 16):
                _refuse_link(archive, info.filename, "symbolic link")
        files = [m for m in members if not m.is_dir()]
        _check_limits(len(files), sum(m.file_size for m in files), limits, budget, archive)
        written = 0
        for info in files:
            with zf.open(info) as source:
                written += _write_file(source, info.filename, target, budget - written, archive)
    return len(files)


def _extract_tar(archive: Path, target: Path, limits: ExtractionLimits, budget: int) -> int:
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        for member in members:
            _safe_member_path(member.name, target, archive)
            if member.issym() or member.islnk():
                _refuse_link(archive, member.name, "link")
            if not (member.isfile() or member.isdir()):
                _refuse_link(archive, member.name, "special file")
        files = [m for m in members if m.isfile()]
        _check_limits(len(files), sum(m.size for m in files), limits, budget, archive)
        written = 0
        for member in files:
            source = tf.extractfile(member)
            assert source is not None  # a regular file always has contents
            with source:
                written += _write_file(source, member.name, target, budget - written, archive)
    return len(files)


def _write_file(source, name: str, target: Path, budget: int, archive: Path) -> int:
    """Write one entry as a new regular file under ``target``; the bytes written."""
    destination = _safe_member_path(name, target, archive)
    destination.parent.mkdir(parents=True, exist_ok=True)
    with open(destination, "xb") as sink:  # never through an existing file or link
        return _copy_limited(source, sink, budget, archive)


def _copy_limited(src, dst, budget: int, archive: Path) -> int:
    """Copy at most ``budget`` bytes: declared sizes in a hostile archive may lie."""
    copied = 0
    while chunk := src.read(1 << 20):
        copied += len(chunk)
        if copied > budget:
            raise UnsafeArchiveError(
                f"refusing {archive}: its data expands beyond the {budget} bytes allowed"
            )
        dst.write(chunk)
    return copied


def copy_tree(source: Path, target: Path) -> int:
    """Copy a directory source into ``target``; return the file count."""
    shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True)
    return sum(1 for p in target.rglob("*") if p.is_file())
