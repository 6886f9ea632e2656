"""The download step's work: a source fetched, verified and extracted into its output."""

from __future__ import annotations

import hashlib
import json
import shutil

import pytest

from components.data import sources
from components.data.test_share import SourceListing
from components.download import main as download_main
from tests.support.downloads import DIGEST, PAYLOAD, fetch
from tests.support.helpers import ScriptedServer


def test_http_download_extracts_and_records(tmp_path):
    with ScriptedServer(PAYLOAD) as server:
        record = fetch(server.url(), tmp_path, sha256=DIGEST)
    assert (tmp_path / "out/PetImages/Cat/7.jpg").read_bytes() == bytes([7]) * 50_000
    saved = json.loads((tmp_path / "out/download.json").read_text())
    listing = (tmp_path / "out/listing.json").read_bytes()
    assert saved == {
        "source": server.url(),
        "bytes": len(PAYLOAD),
        "sha256": DIGEST,
        "file_count": 8,
        "listing": hashlib.sha256(listing).hexdigest(),
        "listing_run": None,  # fetch alone records it nowhere else
    }
    files = SourceListing.from_bytes(listing).files
    assert (
        len(files) == 8
        and files["PetImages/Cat/7.jpg"] == hashlib.sha256(bytes([7]) * 50_000).hexdigest()
    )
    assert record.file_count == 8


def test_what_is_not_an_archive_is_not_kept_in_the_cache(tmp_path):
    page = b"<html>Please sign in</html>"
    with ScriptedServer(page) as server:
        with pytest.raises(ValueError, match="expected a .zip or .tar"):
            fetch(server.url(), tmp_path)
        with pytest.raises(ValueError, match="expected a .zip or .tar"):
            fetch(server.url(), tmp_path)
    assert len(server.requests) == 2  # fetched again, not served from the cache
    assert list((tmp_path / "cache").iterdir()) == []


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


def test_a_digest_for_a_directory_source_is_an_error(tmp_path):
    (tmp_path / "src/PetImages").mkdir(parents=True)
    with pytest.raises(ValueError, match="sha256 applies to an archive file"):
        fetch(str(tmp_path / "src"), tmp_path, sha256=DIGEST)
    assert not (tmp_path / "out").exists()


def test_missing_local_source_says_what_was_expected(tmp_path):
    expected = "expected the source as a .zip, .tar.gz or folder at .*nope.zip, found nothing"
    with pytest.raises(FileNotFoundError, match=expected):
        fetch(str(tmp_path / "nope.zip"), tmp_path)


def test_refuses_to_replace_a_foreign_directory(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out/precious.txt").write_text("keep me")
    archive = tmp_path / "a.zip"
    archive.write_bytes(PAYLOAD)
    with pytest.raises(FileExistsError, match="refusing to replace"):
        fetch(str(archive), tmp_path)
    assert (tmp_path / "out/precious.txt").read_text() == "keep me"


def test_a_password_in_the_source_is_used_but_never_shown_or_recorded(tmp_path, capsys):
    with ScriptedServer(PAYLOAD, script=["404"]) as server:
        source = server.url().replace("http://", "http://me:pw-s3cret@")
        with pytest.raises(SystemExit) as stopped:
            download_main(["--source", source, "--output", str(tmp_path / "a")])
        assert "HTTP 404" in str(stopped.value) and "pw-s3cret" not in str(stopped.value)
        assert "http://***@127.0.0.1" in str(stopped.value)
        fetch(source, tmp_path)
        assert (server.requests[-1]["authorization"] or "").startswith("Basic ")
    recorded = (tmp_path / "out/download.json").read_text()
    assert "pw-s3cret" not in recorded and "***@" in recorded
    assert "pw-s3cret" not in capsys.readouterr().err


def test_an_output_that_cannot_be_replaced_is_refused_before_anything_is_fetched(
    tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.txt").write_text("mine")
    with ScriptedServer(PAYLOAD) as server:
        with pytest.raises(SystemExit, match="^error: refusing to replace .*: it was not written"):
            download_main(["--source", server.url(), "--output", "."])
        assert server.requests == []
    assert (tmp_path / "notes.txt").read_text() == "mine"
