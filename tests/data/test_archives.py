"""Safe extraction: hostile, damaged and oversized archives and folders are refused."""

from __future__ import annotations

import gzip
import io
import os
import random
import struct
import tarfile
import warnings
import zipfile
import zlib
from pathlib import Path

import pytest

from components.data.archives import DamagedArchiveError, ExtractionLimits, UnsafeArchiveError
from components.downloading import fetch as fetching
from tests.support.downloads import PAYLOAD, fetch
from tests.support.helpers import tar_gz_bytes, zip_bytes, zip_with_symlink


def test_directory_source_is_copied(tmp_path):
    source = tmp_path / "src/PetImages/Cat"
    source.mkdir(parents=True)
    (source / "1.jpg").write_bytes(b"x")
    record = fetch(f"file://{tmp_path / 'src'}", tmp_path)
    assert (tmp_path / "out/PetImages/Cat/1.jpg").read_bytes() == b"x"
    assert record.file_count == 1


def test_a_directory_source_follows_links_to_photos_and_refuses_loops_pipes_devices(tmp_path):
    elsewhere = tmp_path / "elsewhere/2.jpg"
    elsewhere.parent.mkdir()
    elsewhere.write_bytes(b"photo")
    cats = tmp_path / "src/PetImages/Cat"
    cats.mkdir(parents=True)
    (cats / "2.jpg").symlink_to(elsewhere)
    fetch(str(tmp_path / "src"), tmp_path)
    copied = tmp_path / "out/PetImages/Cat/2.jpg"
    assert copied.read_bytes() == b"photo" and not copied.is_symlink()
    with pytest.raises(UnsafeArchiveError, match="max_files"):
        fetch(str(tmp_path / "src"), tmp_path / "b", limits=ExtractionLimits(max_files=0))
    with pytest.raises(UnsafeArchiveError, match=r"more than allowed \(max_bytes 3\)$"):
        fetch(str(tmp_path / "src"), tmp_path / "b", limits=ExtractionLimits(max_bytes=3))
    for name, make, error, message in [
        ("loop", lambda p: p.symlink_to(".."), UnsafeArchiveError, "reached through a link"),
        ("pipe.jpg", os.mkfifo, UnsafeArchiveError, "is a special file"),
        ("zero.jpg", lambda p: p.symlink_to("/dev/zero"), UnsafeArchiveError, "special file"),
        ("gone.jpg", lambda p: p.symlink_to(tmp_path / "nothing"), OSError, "link to nothing"),
    ]:
        make(cats / name)
        with pytest.raises(error, match=message):
            fetch(str(tmp_path / "src"), tmp_path)
        (cats / name).unlink()
    assert sorted(p.name for p in (tmp_path / "out/PetImages/Cat").iterdir()) == ["2.jpg"]


def test_a_folder_of_the_source_that_cannot_be_read_stops_the_copy(tmp_path, monkeypatch):
    """Unreadable as permissions would make it: a stand-in, since the tests run as root."""
    (tmp_path / "src/PetImages/Cat").mkdir(parents=True)
    (tmp_path / "src/PetImages/Dog").mkdir()
    (tmp_path / "src/PetImages/Cat/1.jpg").write_bytes(b"x")
    scandir = os.scandir

    def refuse_dogs(path="."):
        if isinstance(path, str) and Path(path).name == "Dog":
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refuse_dogs)
    with pytest.raises(PermissionError, match="Dog"):
        fetch(str(tmp_path / "src"), tmp_path)
    assert not (tmp_path / "out").exists()


def special_tar(kind: bytes, linkname: str = "") -> bytes:
    """A tar with one photo and one entry of ``kind`` (a hard link, a FIFO, a device)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        photo = tarfile.TarInfo("PetImages/Cat/0.jpg")
        photo.size = 3
        tf.addfile(photo, io.BytesIO(b"jpg"))
        entry = tarfile.TarInfo("PetImages/Cat/odd")
        entry.type, entry.linkname = kind, linkname
        tf.addfile(entry)
    return buffer.getvalue()


def realpath_overflow_tar() -> bytes:
    """The shape of CVE-2025-4517: paths longer than PATH_MAX through a symlink chain.

    On an unpatched interpreter the ``data`` filter's realpath check is fooled and the
    last entry is written beside the output; this project refuses the first link.
    """
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tf:
        steps = "abcdefghijklmnop"
        path = ""
        for step in steps:
            folder = tarfile.TarInfo(path + "d" * 247)
            folder.type = tarfile.DIRTYPE
            tf.addfile(folder)
            link = tarfile.TarInfo(path + step)
            link.type, link.linkname = tarfile.SYMTYPE, "d" * 247
            tf.addfile(link)
            path += "d" * 247 + "/"
        escape = tarfile.TarInfo("/".join(steps) + "/" + "../" * len(steps) + "../escaped")
        escape.type, escape.linkname = tarfile.SYMTYPE, ".."
        tf.addfile(escape)
    return buffer.getvalue()


def tar_of(*entries: tuple[str, bytes], compression: str = "gz") -> bytes:
    """A tar of ``(name, data)`` entries in order, names repeated if given so."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=f"w:{compression}") as tf:
        for name, data in entries:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def zip_of(*entries: tuple[str, bytes]) -> bytes:
    """A zip of ``(name, data)`` entries in order, names repeated if given so."""
    buffer = io.BytesIO()
    with warnings.catch_warnings(action="ignore"), zipfile.ZipFile(buffer, "w") as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buffer.getvalue()


def tar_gz_cut_after(*sizes: int) -> bytes:
    """A tar.gz of entries declaring ``sizes``, its stream cut after the last header.

    Reading the whole archive fails at the cut; an extractor that checks each entry as it
    comes refuses an entry over a limit before it gets there.
    """
    raw = io.BytesIO()
    stream = gzip.GzipFile(fileobj=raw, mode="wb")
    for index, size in enumerate(sizes):
        info = tarfile.TarInfo(f"PetImages/Cat/{index}.jpg")
        info.size = size
        stream.write(info.tobuf() + bytes(min(size, 1 << 20) + -size % tarfile.BLOCKSIZE))
    stream.flush(zlib.Z_SYNC_FLUSH)  # all written so far can be read, then the stream ends
    return raw.getvalue()


def zip_patched(data: bytes, *, flags: int = 0, method: int | None = None) -> bytes:
    """``data``, a zip, with ``flags`` set and ``method`` written in every entry's headers."""
    patched = bytearray(data)
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        start = patched.find(signature)
        while start >= 0:
            struct.pack_into("<H", patched, start + flags_at, patched[start + flags_at] | flags)
            if method is not None:
                struct.pack_into("<H", patched, start + flags_at + 2, method)
            start = patched.find(signature, start + 4)
    return bytes(patched)


def tar_of_noise(count: int, compression: str) -> bytes:
    """A tar of ``count`` files of 5,000 bytes that do not compress (photos do not either)."""
    noise = random.Random(0)
    return tar_of(
        *[(f"PetImages/Cat/{i}.jpg", noise.randbytes(5000)) for i in range(count)],
        compression=compression,
    )


MALICIOUS = {
    "zip-slip": zip_bytes({"PetImages/ok.jpg": b"1", "../../evil.txt": b"pwned"}),
    "zip-absolute": zip_bytes({"/tmp/evil-absolute.txt": b"pwned"}),
    "zip-link-out": zip_with_symlink("PetImages/link", "../../../etc/passwd"),
    "tar-slip": tar_gz_bytes({"PetImages/ok.jpg": b"1", "../evil.txt": b"pwned"}),
    "tar-absolute": tar_gz_bytes({"/tmp/evil-absolute.txt": b"pwned"}),
    "tar-link-out": tar_gz_bytes({}, symlinks={"PetImages/link": "/etc/passwd"}),
    "tar-link-climb": tar_gz_bytes({}, symlinks={"PetImages/link": "../../outside"}),
    # each link lexically inside the tree, the chain outside it
    "tar-link-chain": tar_gz_bytes(
        {}, symlinks={"PetImages/a": "b/../..", "PetImages/b": ".", "PetImages/c": "a/.."}
    ),
    "zip-link-inside": zip_with_symlink("PetImages/Cat/1.jpg", "2.jpg"),
    "tar-hardlink": special_tar(tarfile.LNKTYPE, linkname="PetImages/Cat/0.jpg"),
    "tar-fifo": special_tar(tarfile.FIFOTYPE),
    "tar-device": special_tar(tarfile.CHRTYPE),
    "tar-cve-2025-4517": realpath_overflow_tar(),
    # the same name twice: which copy wins differs between tools
    "zip-twice": zip_of(("PetImages/Cat/1.jpg", b"cat"), ("PetImages/Cat/1.jpg", b"other")),
    "tar-twice": tar_of(("PetImages/Cat/1.jpg", b"cat"), ("PetImages/Cat/1.jpg", b"other")),
    "zip-file-as-folder": zip_of(("PetImages", b"x"), ("PetImages/Cat/1.jpg", b"cat")),
    "tar-file-without-name": tar_of(("PetImages/Cat/1.jpg", b"cat"), ("", b"x")),
    "zip-encrypted": zip_patched(zip_of(("PetImages/Cat/1.jpg", b"cat")), flags=0x1),
    "zip-name-too-long": zip_of(("PetImages/" + "a" * 300 + ".jpg", b"cat")),
}


@pytest.mark.parametrize("kind", sorted(MALICIOUS))
def test_malicious_archives_are_refused(tmp_path, kind):
    archive = tmp_path / "in" / f"{kind}.archive"
    archive.parent.mkdir()
    archive.write_bytes(MALICIOUS[kind])
    (tmp_path / "work").mkdir()
    with pytest.raises(UnsafeArchiveError, match="refusing"):
        fetch(str(archive), tmp_path / "work")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in", "work"]
    assert list((tmp_path / "work").iterdir()) == []
    assert not Path("/tmp/evil-absolute.txt").exists()


def test_archive_bomb_limits(tmp_path):
    archive = tmp_path / "many.zip"
    archive.write_bytes(zip_bytes({f"f{i}": b"0" * 1000 for i in range(20)}))
    with pytest.raises(UnsafeArchiveError, match="max_files"):
        fetching.fetch(str(archive), tmp_path / "a", limits=ExtractionLimits(max_files=10))
    with pytest.raises(UnsafeArchiveError, match="max_bytes"):
        fetching.fetch(str(archive), tmp_path / "b", limits=ExtractionLimits(max_bytes=5000))
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_compression_bomb_is_refused_by_its_ratio(tmp_path):
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("PetImages/Cat/0.jpg", b"\0" * 20_000_000)  # 20 MB from about 20 KB
    archive = tmp_path / "bomb.zip"
    archive.write_bytes(bomb.getvalue())
    with pytest.raises(UnsafeArchiveError, match="max_ratio 50.0"):
        fetch(str(archive), tmp_path)
    assert not (tmp_path / "out").exists()
    # the limit is the user's to raise
    fetch(str(archive), tmp_path, limits=ExtractionLimits(max_ratio=2000))
    assert (tmp_path / "out/PetImages/Cat/0.jpg").stat().st_size == 20_000_000


def test_a_zip_directory_too_big_for_max_files_is_refused_before_it_is_listed(tmp_path):
    names = [f"PetImages/Cat/{'long-name-' * 20}{i}.jpg" for i in range(30)]  # 264 bytes listed
    archive = tmp_path / "listing.zip"
    archive.write_bytes(zip_of(*[(name, b"") for name in names]))
    with pytest.raises(UnsafeArchiveError, match=r"directory of entries takes \d+ bytes, more"):
        fetch(str(archive), tmp_path, limits=ExtractionLimits(max_files=20))
    assert fetch(str(archive), tmp_path, limits=ExtractionLimits(max_files=40)).file_count == 30


def test_a_zip64_directory_size_is_read_from_the_zip64_record(tmp_path, monkeypatch):
    monkeypatch.setattr(zipfile, "ZIP_FILECOUNT_LIMIT", 1)  # write zip64 end records
    data = bytearray(zip_of(*[(f"PetImages/Cat/{i}.jpg", b"cat") for i in range(3)]))
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<L", data, end + 12, 0xFFFFFFFF)  # the size as a zip64 writer leaves it
    archive = tmp_path / "zip64.zip"
    archive.write_bytes(bytes(data))
    assert fetch(str(archive), tmp_path, limits=ExtractionLimits(max_files=3)).file_count == 3


def test_a_tar_bomb_is_refused_at_the_entry_over_the_limit_before_the_rest_is_read(tmp_path):
    archive = tmp_path / "bomb.tar.gz"
    archive.write_bytes(tar_gz_cut_after(4 * 1024**3))  # 4 GiB declared, 4 KB sent
    with pytest.raises(UnsafeArchiveError, match="max_ratio 50.0"):
        fetch(str(archive), tmp_path)
    archive.write_bytes(tar_gz_cut_after(*[100] * 11))
    with pytest.raises(UnsafeArchiveError, match="max_files"):
        fetch(str(archive), tmp_path, limits=ExtractionLimits(max_files=10))
    assert not (tmp_path / "out").exists()


DAMAGED = {
    "zip-bad-crc": zip_of(("PetImages/Cat/1.jpg", b"cat" * 100)).replace(
        b"cat" * 100, b"dog" * 100
    ),
    "zip-unknown-method": zip_patched(zip_of(("PetImages/Cat/1.jpg", b"cat")), method=99),
    "tar-gz-cut-short": tar_of_noise(20, "gz")[:50_000],
    "tar-cut-in-an-entry": tar_of_noise(20, "")[:50_000],
    # tarfile reads an unreadable header as the end: the last 19 photos would go unnoticed
    "tar-header-overwritten": tar_of_noise(20, "")[:6000]
    + b"garbage" * 100
    + tar_of_noise(20, "")[6700:],
}


@pytest.mark.parametrize("kind", sorted(DAMAGED))
def test_a_damaged_archive_is_named_as_such_and_the_good_output_survives(tmp_path, kind):
    good = tmp_path / "good.zip"
    good.write_bytes(PAYLOAD)
    fetch(str(good), tmp_path)
    archive = tmp_path / f"{kind}.archive"
    archive.write_bytes(DAMAGED[kind])
    with pytest.raises(DamagedArchiveError, match=f"cannot extract {archive}: .* cut short or"):
        fetch(str(archive), tmp_path)
    assert len(list((tmp_path / "out/PetImages/Cat").iterdir())) == 8


def test_not_an_archive_is_a_clear_error(tmp_path):
    bogus = tmp_path / "page.zip"
    bogus.write_text("<html>503 Service Unavailable</html>")
    with pytest.raises(ValueError, match="expected a .zip or .tar"):
        fetch(str(bogus), tmp_path)


@pytest.mark.parametrize("empty", [zip_bytes({}), tar_gz_bytes({})], ids=["zip", "tar.gz"])
def test_an_empty_archive_is_an_error_and_the_good_output_survives(tmp_path, empty):
    good = tmp_path / "good.zip"
    good.write_bytes(PAYLOAD)
    fetch(str(good), tmp_path)
    before = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*"))
    archive = tmp_path / "empty.archive"
    archive.write_bytes(empty)
    with pytest.raises(ValueError, match="found no files in it"):
        fetch(str(archive), tmp_path)
    after = sorted(p.relative_to(tmp_path / "out") for p in (tmp_path / "out").rglob("*"))
    assert after == before and len(before) > 8


def test_an_html_page_in_place_of_the_archive_is_named_as_such(tmp_path):
    page = tmp_path / "archive.zip"
    page.write_bytes(b"\n  <!DOCTYPE html><html><body>Sign in to download</body></html>")
    with pytest.raises(ValueError, match="found an HTML or XML page"):
        fetching.fetch(str(page), tmp_path / "out")
    assert not (tmp_path / "out").exists()
