"""The download step against real servers on 127.0.0.1: HTTP (flaky on cue) and S3 (moto)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import random
import shutil
import socket
import struct
import tarfile
import time
import warnings
import zipfile
import zlib
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from components import download
from components.data import sources
from components.data.archives import DamagedArchiveError, ExtractionLimits, UnsafeArchiveError
from tests.helpers import ScriptedServer, tar_gz_bytes, zip_bytes, zip_with_symlink

FAST = sources.RetryPolicy(attempts=4, backoff_seconds=0.01, stall_seconds=10)
PAYLOAD = zip_bytes({f"PetImages/Cat/{i}.jpg": bytes([i]) * 50_000 for i in range(8)})
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


def fetch(source, tmp_path, **kwargs):
    return download.fetch(
        source, tmp_path / "out", cache_dir=tmp_path / "cache", retry=FAST, **kwargs
    )


def test_http_download_extracts_and_records(tmp_path):
    with ScriptedServer(PAYLOAD) as server:
        record = fetch(server.url(), tmp_path, sha256=DIGEST)
    assert (tmp_path / "out/PetImages/Cat/7.jpg").read_bytes() == bytes([7]) * 50_000
    saved = json.loads((tmp_path / "out/download.json").read_text())
    assert saved == {
        "source": server.url(),
        "bytes": len(PAYLOAD),
        "sha256": DIGEST,
        "file_count": 8,
    }
    assert record.file_count == 8


def test_5xx_is_retried_then_succeeds(tmp_path):
    with ScriptedServer(PAYLOAD, script=["503", "503"]) as server:
        record = fetch(server.url(), tmp_path)
    assert len(server.requests) == 3
    assert record.sha256 == DIGEST


def test_dropped_connection_resumes_with_range(tmp_path):
    with ScriptedServer(PAYLOAD, script=["drop:200000"]) as server:
        record = fetch(server.url(), tmp_path, sha256=DIGEST)
    first, second = (r["range"] for r in server.requests)
    resumed_at = int(second.removeprefix("bytes=").rstrip("-"))
    assert first is None and 0 < resumed_at <= 200_000
    assert record.sha256 == DIGEST


@pytest.mark.parametrize("damage", ["[]", "{", '{"url": "URL", "validator": "W/x"}'])
def test_a_partial_download_whose_record_does_not_read_starts_over(tmp_path, damage):
    once = sources.RetryPolicy(attempts=1, stall_seconds=10)
    with ScriptedServer(PAYLOAD, script=["drop:200000"]) as server:
        with pytest.raises(sources.DownloadError):  # leaves a .part and its version record
            download.fetch(server.url(), tmp_path / "out", cache_dir=tmp_path / "cache", retry=once)
        (version,) = (tmp_path / "cache").glob("*.version.json")
        version.write_text(damage.replace("URL", server.url()))  # the last: no total
        record = fetch(server.url(), tmp_path, sha256=DIGEST)
    assert [r["range"] for r in server.requests] == [None, None]
    assert record.sha256 == DIGEST


def test_a_file_changed_between_attempts_is_fetched_again_not_spliced(tmp_path):
    changed = zip_bytes({f"PetImages/Dog/{i}.jpg": bytes([i + 1]) * 50_000 for i in range(8)})
    with ScriptedServer(PAYLOAD, script=["drop:200000"], then=changed) as server:
        first_etag = server.current_etag()
        record = fetch(server.url(), tmp_path)
    second = server.requests[1]
    assert second["range"] and second["if-range"] == first_etag  # asked for the same version
    assert record.sha256 == hashlib.sha256(changed).hexdigest()
    assert sorted(p.name for p in (tmp_path / "out/PetImages").iterdir()) == ["Dog"]


def test_without_a_validator_a_partial_download_is_not_resumed(tmp_path):
    with ScriptedServer(PAYLOAD, script=["drop:200000"], etag=False) as server:
        record = fetch(server.url(), tmp_path, sha256=DIGEST)
    assert [r["range"] for r in server.requests] == [None, None]
    assert record.sha256 == DIGEST


def test_a_body_shorter_than_announced_is_an_error_and_nothing_is_kept(tmp_path):
    with ScriptedServer(PAYLOAD, script=["drop:1000"] * 4, ranges=False) as server:
        with pytest.raises(sources.DownloadError, match="after 4 attempts"):
            fetch(server.url(), tmp_path)
    assert not (tmp_path / "out").exists()
    assert not [
        p
        for p in (tmp_path / "cache").iterdir()
        if not p.name.startswith(".") and not p.name.endswith((".part", ".version.json"))
    ]


def test_a_server_that_trickles_is_a_stall_not_a_hang(tmp_path):
    policy = sources.RetryPolicy(attempts=2, backoff_seconds=0.01, stall_seconds=1)
    started = time.monotonic()
    with ScriptedServer(PAYLOAD, script=["trickle", "trickle"]) as server:
        with pytest.raises(sources.DownloadError, match="stalled"):
            download.fetch(server.url(), tmp_path / "out", cache_dir=tmp_path, retry=policy)
    assert time.monotonic() - started < 15
    assert len(server.requests) == 2


def test_a_server_that_never_answers_costs_the_stall_timeout_per_attempt(tmp_path):
    policy = sources.RetryPolicy(attempts=2, backoff_seconds=0.01, stall_seconds=1)
    started = time.monotonic()
    with ScriptedServer(PAYLOAD, script=["hang", "hang"]) as server:
        with pytest.raises(sources.DownloadError, match="timed out"):
            download.fetch(server.url(), tmp_path / "out", cache_dir=tmp_path, retry=policy)
    assert time.monotonic() - started < 10


def test_the_deadline_ends_a_slow_download_and_its_retries(tmp_path):
    slow = sources.RetryPolicy(attempts=3, stall_seconds=30, deadline_seconds=1)
    with ScriptedServer(PAYLOAD, script=["trickle"]) as server:
        with pytest.raises(sources.DownloadError, match="deadline passed"):
            download.fetch(server.url(), tmp_path / "a", cache_dir=tmp_path, retry=slow)
    backoff = sources.RetryPolicy(attempts=3, backoff_seconds=5, deadline_seconds=2)
    started = time.monotonic()
    with ScriptedServer(PAYLOAD, script=["503"] * 3) as server:
        with pytest.raises(sources.DownloadError, match="deadline of 2s"):
            download.fetch(server.url(), tmp_path / "b", cache_dir=tmp_path, retry=backoff)
    assert time.monotonic() - started < 4 and len(server.requests) == 1


def test_what_is_not_an_archive_is_not_kept_in_the_cache(tmp_path):
    page = b"<html>Please sign in</html>"
    with ScriptedServer(page) as server:
        with pytest.raises(ValueError, match="expected a .zip or .tar"):
            fetch(server.url(), tmp_path)
        with pytest.raises(ValueError, match="expected a .zip or .tar"):
            fetch(server.url(), tmp_path)
    assert len(server.requests) == 2  # fetched again, not served from the cache
    assert list((tmp_path / "cache").iterdir()) == []


def test_server_without_ranges_restarts_from_zero(tmp_path):
    with ScriptedServer(PAYLOAD, script=["drop:200000"], ranges=False) as server:
        record = fetch(server.url(), tmp_path, sha256=DIGEST)
    assert len(server.requests) == 2
    assert record.sha256 == DIGEST


def test_a_download_over_max_bytes_is_refused_announced_or_streamed(tmp_path):
    limits = ExtractionLimits(max_bytes=len(PAYLOAD) - 1)
    with ScriptedServer(PAYLOAD) as server:
        with pytest.raises(sources.DownloadError, match=f"announces {len(PAYLOAD)} bytes, over"):
            fetch(server.url(), tmp_path, limits=limits)
    with ScriptedServer(PAYLOAD, script=["endless"]) as server:
        with pytest.raises(sources.DownloadError, match=r"streams at least .* \(--max-bytes\)"):
            fetch(server.url(), tmp_path, limits=ExtractionLimits(max_bytes=1_000_000))
    assert len(server.requests) == 1  # refused, not retried
    assert list((tmp_path / "cache").iterdir()) == []
    assert not (tmp_path / "out").exists()


def test_the_archive_comes_as_its_own_bytes_not_as_a_server_re_encodes_it(tmp_path):
    with ScriptedServer(PAYLOAD, gzip="accepted") as server:  # a server that gzips on request
        assert fetch(server.url(), tmp_path, sha256=DIGEST).file_count == 8
    with ScriptedServer(PAYLOAD, gzip="always") as server:
        with pytest.raises(sources.DownloadError, match="came gzip-encoded although"):
            fetch(server.url(), tmp_path / "b")
    assert len(server.requests) == 1  # not retried


@pytest.mark.parametrize(
    ("location", "error"),
    [("file:///etc/passwd", "InvalidSchema"), ("/archive.zip", "TooManyRedirects")],
)
def test_a_redirect_off_http_or_in_a_loop_is_a_clear_error(tmp_path, location, error):
    with ScriptedServer(PAYLOAD, script=[f"redirect:{location}"] * 40) as server:
        with pytest.raises(sources.DownloadError, match=f"cannot download {server.url()}: {error}"):
            fetch(server.url(), tmp_path)
    assert not (tmp_path / "out").exists()


def test_client_error_is_not_retried(tmp_path):
    with ScriptedServer(PAYLOAD, script=["404"]) as server:
        with pytest.raises(sources.DownloadError, match="HTTP 404"):
            fetch(server.url(), tmp_path)
    assert len(server.requests) == 1
    assert not (tmp_path / "out").exists()


def test_persistent_5xx_gives_up_with_the_attempt_count(tmp_path):
    with ScriptedServer(PAYLOAD, script=["503"] * 10) as server:
        with pytest.raises(sources.DownloadError, match="after 4 attempts"):
            fetch(server.url(), tmp_path)


def test_wrong_digest_names_both_and_leaves_nothing(tmp_path):
    wrong = "0" * 64
    with ScriptedServer(PAYLOAD) as server:
        with pytest.raises(sources.DigestMismatchError) as err:
            fetch(server.url(), tmp_path, sha256=wrong)
    assert wrong in str(err.value) and DIGEST in str(err.value)
    assert not (tmp_path / "out").exists()
    assert list((tmp_path / "cache").iterdir()) == []


def test_second_run_with_same_digest_reuses_output(tmp_path):
    with ScriptedServer(PAYLOAD) as server:
        fetch(server.url(), tmp_path, sha256=DIGEST)
        fetch(server.url(), tmp_path, sha256=DIGEST)
        assert len(server.requests) == 1
        shutil.rmtree(tmp_path / "out")  # the output is gone: the cached archive serves
        fetch(server.url(), tmp_path, sha256=DIGEST)
        assert len(server.requests) == 1
        for damage in ("{", '{"source": 1}', "[]"):  # a record that does not read: extract again
            (tmp_path / "out/download.json").write_text(damage)
            fetch(server.url(), tmp_path, sha256=DIGEST)
            assert json.loads((tmp_path / "out/download.json").read_text())["sha256"] == DIGEST
        assert len(server.requests) == 1


@pytest.fixture
def s3_endpoint(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


def test_s3_source_with_endpoint_flag(tmp_path, s3_endpoint):
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="datasets")
    s3.put_object(
        Bucket="datasets",
        Key="pets/archive.tar.gz",
        Body=tar_gz_bytes({"PetImages/Dog/1.jpg": b"woof"}),
    )
    download.main(
        [
            "--source",
            "s3://datasets/pets/archive.tar.gz",
            "--output",
            str(tmp_path / "out"),
            "--s3-endpoint-url",
            s3_endpoint,
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
    )
    assert (tmp_path / "out/PetImages/Dog/1.jpg").read_bytes() == b"woof"


def test_s3_endpoint_from_environment_and_missing_key(tmp_path, s3_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    boto3.client("s3").create_bucket(Bucket="datasets")
    with pytest.raises(sources.DownloadError, match="s3://datasets/missing.zip"):
        fetch("s3://datasets/missing.zip", tmp_path)
    boto3.client("s3").put_object(Bucket="datasets", Key="big.zip", Body=PAYLOAD)
    with pytest.raises(sources.DownloadError, match=f"holds {len(PAYLOAD)} bytes, over the 1000"):
        fetch("s3://datasets/big.zip", tmp_path, limits=ExtractionLimits(max_bytes=1000))
    assert list((tmp_path / "cache").iterdir()) == []


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


def test_a_digest_for_a_directory_source_is_an_error(tmp_path):
    (tmp_path / "src/PetImages").mkdir(parents=True)
    with pytest.raises(ValueError, match="sha256 applies to an archive file"):
        fetch(str(tmp_path / "src"), tmp_path, sha256=DIGEST)
    assert not (tmp_path / "out").exists()


def test_missing_local_source_says_what_was_expected(tmp_path):
    with pytest.raises(FileNotFoundError, match="expected an archive or directory"):
        fetch(str(tmp_path / "nope.zip"), tmp_path)


def test_refuses_to_replace_a_foreign_directory(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out/precious.txt").write_text("keep me")
    archive = tmp_path / "a.zip"
    archive.write_bytes(PAYLOAD)
    with pytest.raises(FileExistsError, match="refusing to replace"):
        fetch(str(archive), tmp_path)
    assert (tmp_path / "out/precious.txt").read_text() == "keep me"


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
        download.fetch(str(archive), tmp_path / "a", limits=ExtractionLimits(max_files=10))
    with pytest.raises(UnsafeArchiveError, match="max_bytes"):
        download.fetch(str(archive), tmp_path / "b", limits=ExtractionLimits(max_bytes=5000))
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


def test_an_s3_endpoint_that_never_answers_is_a_clear_error_in_bounded_time(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    policy = sources.RetryPolicy(attempts=1, stall_seconds=1)
    started = time.monotonic()
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(sources.DownloadError, match="cannot read s3://photos/a.zip"):
            download.fetch(
                "s3://photos/a.zip",
                tmp_path / "out",
                cache_dir=tmp_path / "cache",
                s3_endpoint_url=endpoint,
                retry=policy,
            )
    assert time.monotonic() - started < 15
    assert not (tmp_path / "out").exists()
