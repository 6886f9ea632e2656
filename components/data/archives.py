"""Extract .zip and .tar(.gz) archives safely: no path escapes, no archive bombs."""

from __future__ import annotations

import errno
import gzip
import lzma
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

ENCRYPTED = 0x1  # the zip entry flag bit of a password-protected entry
# a zip's end records (APPNOTE 4.3.16, 4.3.15, 4.3.14); the directory's size is in each
END_RECORD = struct.Struct("<4s4H2LH")
ZIP64_LOCATOR = struct.Struct("<4sLQL")
ZIP64_END_RECORD = struct.Struct("<4sQ2H2L4Q")
# a directory entry is 46 bytes plus its name and extra fields (about 92 in all in the
# 23k zip): 256 leaves room for long names
DIRECTORY_BYTES_PER_FILE = 256
# what Python's readers raise on data cut short or corrupt (and zipfile on a method it lacks)
DAMAGE = (
    zipfile.BadZipFile,
    tarfile.TarError,
    zlib.error,
    gzip.BadGzipFile,
    lzma.LZMAError,
    EOFError,
    NotImplementedError,
)


class UnsafeArchiveError(ValueError):
    """An archive entry would escape the target directory or exceed the limits."""


class DamagedArchiveError(ValueError):
    """An archive's data is cut short or corrupt."""


@dataclass(frozen=True)
class ExtractionLimits:
    """Guards against archive bombs; the defaults fit the PetImages archive (25,000 photos,
    about 0.8 GB, stored nearly uncompressed) several times over."""

    max_files: int = 100_000
    max_bytes: int = 8 * 1024**3
    max_ratio: float = 50.0  # uncompressed bytes per archive byte; JPEGs barely compress


def extract(archive: Path, target: Path, limits: ExtractionLimits = ExtractionLimits()) -> int:
    """Extract a zip or tar ``archive`` (told by content) into ``target``.

    Only regular files are written, by this code and not the tarfile module's
    extraction filters, so safety does not hang on the interpreter's patch level
    (CVE-2025-4517). Links of any kind, special files, encrypted entries and names
    given twice are refused: a photo archive has no use for them. A tar is read one
    entry at a time, so an archive bomb is refused at the entry that crosses a limit,
    not after decompressing all of it. On an error ``target`` may hold part of the
    archive: extract into a staging directory.

    Returns:
        The number of files written.

    Raises:
        UnsafeArchiveError: an entry escapes ``target``, is a link, a special file,
            encrypted or given twice, or the archive exceeds a limit.
        DamagedArchiveError: the archive's data is cut short or corrupt.
        ValueError: ``archive`` is neither a zip nor a tar file.
    """
    budget = min(limits.max_bytes, int(limits.max_ratio * max(archive.stat().st_size, 1)))
    tally = _Tally(archive, limits, budget)
    if zipfile.is_zipfile(archive):
        unpack = _extract_zip
    elif tarfile.is_tarfile(archive):
        unpack = _extract_tar
    else:
        raise ValueError(
            f"expected a .zip or .tar(.gz) archive at {archive}, found {_what_it_is(archive)}"
        )
    try:
        unpack(archive, target.resolve(), tally)
    except DAMAGE as err:
        reason = str(err) or type(err).__name__
        raise DamagedArchiveError(
            f"cannot extract {archive}: its data is cut short or corrupt ({reason})"
        ) from err
    return tally.files


class _Tally:
    """Counts an archive's files and declared bytes against the limits as they come."""

    def __init__(self, archive: Path, limits: ExtractionLimits, budget: int) -> None:
        self.archive, self.limits, self.budget = archive, limits, budget
        self.files = self.declared = self.written = 0

    def admit(self, size: int) -> None:
        """Count one more file of ``size`` declared bytes; refuse it over a limit."""
        self.files += 1
        self.declared += size
        if self.files > self.limits.max_files:
            raise UnsafeArchiveError(
                f"refusing {self.archive}: more than {self.limits.max_files} files "
                "(max_files limit)"
            )
        if self.declared > self.budget:
            limit = f"max_bytes {self.limits.max_bytes}"
            if self.budget < self.limits.max_bytes:  # an archive's size set a lower budget
                limit = f"max_ratio {self.limits.max_ratio} × its size, under {limit}"
            raise UnsafeArchiveError(
                f"refusing {self.archive}: its files come to over {self.budget} bytes, more "
                f"than allowed ({limit})"
            )


def _member_path(name: str, archive: Path) -> PurePosixPath:
    """The entry's relative path, refused if it is absolute or climbs out."""
    pure = PurePosixPath(name.replace("\\", "/"))
    if pure.is_absolute() or name.startswith(("/", "\\")) or (pure.parts and ":" in pure.parts[0]):
        raise UnsafeArchiveError(f"refusing {archive}: entry {name!r} has an absolute path")
    if ".." in pure.parts:
        raise UnsafeArchiveError(f"refusing {archive}: entry {name!r} climbs out with '..'")
    return pure


def _refuse(archive: Path, name: str, kind: str) -> None:
    raise UnsafeArchiveError(
        f"refusing {archive}: entry {name!r} is {kind}; photos come only as plain files in folders"
    )


def _extract_zip(archive: Path, root: Path, tally: _Tally) -> None:
    """Check every entry from the zip's directory first (no data is read), then write."""
    _check_directory_size(archive, tally.limits)
    with zipfile.ZipFile(archive) as zf:
        files = []
        for info in zf.infolist():
            _member_path(info.filename, archive)
            if stat.S_ISLNK(info.external_attr >> 16):
                _refuse(archive, info.filename, "a symbolic link")
            if info.flag_bits & ENCRYPTED:
                _refuse(archive, info.filename, "an encrypted file")
            if not info.is_dir():
                tally.admit(info.file_size)
                files.append(info)
        for info in files:
            with zf.open(info) as source:
                _write_file(source, info.filename, root, tally)


def _check_directory_size(archive: Path, limits: ExtractionLimits) -> None:
    """Refuse a zip whose directory is too big for ``max_files`` before parsing it.

    zipfile holds an object of about 500 bytes per entry: a 92 MB zip of a million empty
    entries took 567 MB to list. The directory's size is read from the end record (its
    zip64 form when the size there is 0xFFFFFFFF).
    """
    allowed = limits.max_files * DIRECTORY_BYTES_PER_FILE
    with open(archive, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        reach = END_RECORD.size + 0xFFFF + ZIP64_LOCATOR.size + ZIP64_END_RECORD.size
        handle.seek(max(size - reach, 0))  # the records, then a comment of up to 64 KiB
        tail = handle.read()
    at = tail.rfind(b"PK\x05\x06", 0, len(tail) - END_RECORD.size + 4)  # as zipfile finds it
    directory = END_RECORD.unpack_from(tail, at)[5] if at >= 0 else 0
    zip64_at = at - ZIP64_LOCATOR.size - ZIP64_END_RECORD.size  # where zipfile reads it
    if directory == 0xFFFFFFFF and zip64_at >= 0 and tail[zip64_at : zip64_at + 4] == b"PK\x06\x06":
        directory = ZIP64_END_RECORD.unpack_from(tail, zip64_at)[7]
    if directory > allowed:
        raise UnsafeArchiveError(
            f"refusing {archive}: its directory of entries takes {directory} bytes, more than "
            f"{limits.max_files} files need ({allowed}; max_files limit)"
        )


def _extract_tar(archive: Path, root: Path, tally: _Tally) -> None:
    """Check and write entry by entry: listing a tar first means decompressing all of it."""
    with tarfile.open(archive) as tf:
        for member in tf:
            _member_path(member.name, archive)
            if member.issym() or member.islnk():
                _refuse(archive, member.name, "a link")
            if not (member.isfile() or member.isdir()):
                _refuse(archive, member.name, "a special file")
            if member.isfile():
                tally.admit(member.size)
                source = tf.extractfile(member)
                assert source is not None  # a regular file always has contents
                with source:
                    _write_file(source, member.name, root, tally)
        _check_end(tf)


def _check_end(tf: tarfile.TarFile) -> None:
    """Refuse what follows the last entry unless it is the end marker's zeros.

    tarfile takes an unreadable header for the end of the archive; without this check
    a tar damaged in the middle would extract as a shorter archive, silently.
    """
    assert tf.fileobj is not None  # an open archive
    tf.fileobj.seek(tf.offset)
    while chunk := tf.fileobj.read(1 << 16):
        if chunk.strip(b"\0"):
            raise tarfile.ReadError(f"an unreadable entry header at byte {tf.offset} of the tar")


def _write_file(source: IO[bytes], name: str, root: Path, tally: _Tally) -> None:
    """Write one entry as a new regular file under ``root``, never through a link."""
    pure = _member_path(name, tally.archive)
    if not pure.parts:
        _refuse(tally.archive, name, "a file without a name")
    destination = root / pure
    if not destination.resolve().is_relative_to(root):
        raise UnsafeArchiveError(f"refusing {tally.archive}: entry {name!r} lands outside {root}")
    try:
        destination.parent.mkdir(parents=True, exist_ok=True)
        with open(destination, "xb") as sink:  # never through an existing file or link
            _copy_limited(source, sink, tally)
    except (FileExistsError, NotADirectoryError) as err:
        raise UnsafeArchiveError(
            f"refusing {tally.archive}: entry {name!r} clashes with an earlier entry: the "
            "same name twice, or a file where a folder is needed"
        ) from err
    except OSError as err:
        if err.errno != errno.ENAMETOOLONG:
            raise
        raise UnsafeArchiveError(
            f"refusing {tally.archive}: entry {name[:80]!r}... has a name too long to write"
        ) from err


def _copy_limited(source: IO[bytes], sink: IO[bytes], tally: _Tally) -> None:
    """Copy while the budget lasts: declared sizes in a hostile archive may lie."""
    while chunk := source.read(1 << 20):
        tally.written += len(chunk)
        if tally.written > tally.budget:
            raise UnsafeArchiveError(
                f"refusing {tally.archive}: its data expands beyond the {tally.budget} "
                "bytes allowed"
            )
        sink.write(chunk)


def copy_tree(source: Path, target: Path, limits: ExtractionLimits = ExtractionLimits()) -> int:
    """Copy the files under the directory ``source`` into ``target``; return their count.

    Links are followed (a folder of links to photos elsewhere is copied as photos), but a
    folder reached twice through links (a loop) and what is not a file or a folder (a
    pipe, a device) are refused, and the copy keeps within ``max_files`` and ``max_bytes``.
    """
    tally = _Tally(source, limits, limits.max_bytes)
    root = target.resolve()
    folders: set[Path] = set()
    for folder, _, names in os.walk(source, onerror=_raise, followlinks=True):
        real = Path(folder).resolve()
        if real in folders:
            raise UnsafeArchiveError(
                f"refusing {source}: {folder} is {real} again, reached through a link (a loop)"
            )
        folders.add(real)
        for name in sorted(names):
            path = Path(folder, name)
            if not path.exists():
                raise FileNotFoundError(f"expected a file at {path}, found a link to nothing")
            info = path.stat()
            relative = path.relative_to(source).as_posix()
            if not stat.S_ISREG(info.st_mode):
                _refuse(source, relative, "a special file")
            tally.admit(info.st_size)
            with open(path, "rb") as handle:
                _write_file(handle, relative, root, tally)
    return tally.files


def _raise(error: OSError) -> None:
    raise error  # os.walk would skip a folder it cannot read, silently


def _what_it_is(path: Path) -> str:
    """A word on a file that is neither zip nor tar: an HTML page is named as such."""
    with open(path, "rb") as file:
        start = file.read(512).lstrip().lower()
    if start.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head", b"<body")):
        return "an HTML or XML page (a login, an error or a download page, not the file)"
    return "neither (a zip cut short has lost the directory at its end)"
