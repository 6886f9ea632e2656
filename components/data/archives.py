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
    """Guards against archive bombs; the defaults fit the PetImages archive many times over."""

    max_files: int = 200_000
    max_bytes: int = 20 * 1024**3


def extract(archive: Path, target: Path, limits: ExtractionLimits = ExtractionLimits()) -> int:
    """Extract a zip or tar ``archive`` (told by content) into ``target``; return the file count."""
    if zipfile.is_zipfile(archive):
        return _extract_zip(archive, target, limits)
    if tarfile.is_tarfile(archive):
        return _extract_tar(archive, target, limits)
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


def _check_limits(files: int, size: int, limits: ExtractionLimits, archive: Path) -> None:
    if files > limits.max_files:
        raise UnsafeArchiveError(
            f"refusing {archive}: more than {limits.max_files} files (max_files limit)"
        )
    if size > limits.max_bytes:
        raise UnsafeArchiveError(
            f"refusing {archive}: more than {limits.max_bytes} bytes uncompressed (max_bytes limit)"
        )


def _extract_zip(archive: Path, target: Path, limits: ExtractionLimits) -> int:
    with zipfile.ZipFile(archive) as zf:
        members = zf.infolist()
        links = {m.filename: _zip_link_target(zf, m) for m in members if _is_zip_link(m)}
        for info in members:
            _safe_member_path(info.filename, target, archive)
        for name, link_target in links.items():
            _check_link(name, link_target, target, archive)
        files = [m for m in members if not m.is_dir() and m.filename not in links]
        _check_limits(len(files), sum(m.file_size for m in files), limits, archive)
        written = 0
        for info in files:
            destination = _safe_member_path(info.filename, target, archive)
            destination.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, open(destination, "wb") as dst:
                written += _copy_limited(src, dst, limits.max_bytes - written, archive)
        for name, link_target in links.items():
            link = _safe_member_path(name, target, archive)
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(link_target)
    return len(files)


def _is_zip_link(info: zipfile.ZipInfo) -> bool:
    return stat.S_ISLNK(info.external_attr >> 16)


def _zip_link_target(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> str:
    return zf.read(info).decode("utf-8", errors="replace")


def _check_link(name: str, link_target: str, target: Path, archive: Path) -> None:
    """Refuse a link whose target, read from the link's own folder, leaves ``target``."""
    link_folder = (target / name).parent
    resolved = (link_folder / link_target).resolve()
    if link_target.startswith("/") or not resolved.is_relative_to(target.resolve()):
        raise UnsafeArchiveError(
            f"refusing {archive}: link {name!r} points outside the tree, to {link_target!r}"
        )


def _copy_limited(src, dst, budget: int, archive: Path) -> int:
    """Copy at most ``budget`` bytes: declared sizes in a hostile zip may lie."""
    copied = 0
    while chunk := src.read(1 << 20):
        copied += len(chunk)
        if copied > budget:
            raise UnsafeArchiveError(f"refusing {archive}: uncompressed data exceeds max_bytes")
        dst.write(chunk)
    return copied


def _extract_tar(archive: Path, target: Path, limits: ExtractionLimits) -> int:
    with tarfile.open(archive) as tf:
        members = tf.getmembers()
        for member in members:
            _safe_member_path(member.name, target, archive)
            if member.issym():
                _check_link(member.name, member.linkname, target, archive)
            try:
                tarfile.data_filter(member, str(target))
            except tarfile.FilterError as err:
                raise UnsafeArchiveError(f"refusing {archive}: {err}") from err
        files = [m for m in members if m.isfile()]
        _check_limits(len(files), sum(m.size for m in files), limits, archive)
        tf.extractall(target, members=members, filter="data")
    return len(files)


def copy_tree(source: Path, target: Path) -> int:
    """Copy a directory source into ``target``; return the file count."""
    shutil.copytree(source, target, symlinks=False, dirs_exist_ok=True)
    return sum(1 for p in target.rglob("*") if p.is_file())
