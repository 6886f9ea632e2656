"""Fetching against real servers on 127.0.0.1: HTTP (flaky on cue) and S3 (SeaweedFS)."""

from __future__ import annotations

import hashlib
import json
import socket
import time

import boto3
import pytest
from mlflow.tracking import MlflowClient

from components.data import sources
from components.data.archives import ExtractionLimits
from components.download import main as download_main
from components.downloading import fetch as fetching
from tests.support.downloads import DIGEST, PAYLOAD, fetch
from tests.support.helpers import ScriptedServer, tar_gz_bytes, zip_bytes
from tests.support.servers import S3_KEYS, SeaweedS3


@pytest.fixture(scope="module")
def seaweed():
    with SeaweedS3() as server:
        yield server


@pytest.fixture
def s3_endpoint(seaweed, monkeypatch):
    for key, value in S3_KEYS.items():
        monkeypatch.setenv(key, value)
    return seaweed.endpoint


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
            fetching.fetch(server.url(), tmp_path / "out", cache_dir=tmp_path / "cache", retry=once)
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
    with ScriptedServer(PAYLOAD, script=["trickle", "trickle"]) as server:
        with pytest.raises(sources.DownloadError, match="stalled"):
            fetching.fetch(server.url(), tmp_path / "out", cache_dir=tmp_path, retry=policy)
    assert len(server.requests) == 2


def test_a_server_that_never_answers_costs_the_stall_timeout_per_attempt(tmp_path):
    policy = sources.RetryPolicy(attempts=2, backoff_seconds=0.01, stall_seconds=1)
    with ScriptedServer(PAYLOAD, script=["hang", "hang"]) as server:
        with pytest.raises(sources.DownloadError, match="timed out"):  # each attempt's stall
            fetching.fetch(server.url(), tmp_path / "out", cache_dir=tmp_path, retry=policy)
    assert len(server.requests) == 2


def test_the_deadline_ends_a_slow_download_and_its_retries(tmp_path):
    slow = sources.RetryPolicy(attempts=3, stall_seconds=30, deadline_seconds=1)
    with ScriptedServer(PAYLOAD, script=["trickle"]) as server:
        with pytest.raises(sources.DownloadError, match="deadline passed"):
            fetching.fetch(server.url(), tmp_path / "a", cache_dir=tmp_path, retry=slow)
    backoff = sources.RetryPolicy(attempts=3, backoff_seconds=5, deadline_seconds=2)
    with ScriptedServer(PAYLOAD, script=["503"] * 3) as server:
        with pytest.raises(sources.DownloadError, match="deadline of 2s"):
            fetching.fetch(server.url(), tmp_path / "b", cache_dir=tmp_path, retry=backoff)
    # urllib3's back-off: the first retry at once, the next after 5 × 2 s, past the
    # deadline: the third attempt is never made
    assert len(server.requests) == 2


def test_a_servers_retry_after_is_waited_for(tmp_path):
    policy = sources.RetryPolicy(attempts=3, backoff_seconds=0.01)
    started = time.monotonic()
    with ScriptedServer(PAYLOAD, script=["429:2"]) as server:
        record = fetching.fetch(server.url(), tmp_path / "out", cache_dir=tmp_path, retry=policy)
    assert time.monotonic() - started >= 2 and len(server.requests) == 2
    assert record.sha256 == DIGEST


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


@pytest.mark.integration
def test_s3_source_with_endpoint_flag(tmp_path, s3_endpoint, mlflow_store):
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket="datasets")
    s3.put_object(
        Bucket="datasets",
        Key="pets/archive.tar.gz",
        Body=tar_gz_bytes({"PetImages/Dog/1.jpg": b"woof"}),
    )
    download_main(
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
    record = json.loads((tmp_path / "out/download.json").read_text())
    run = MlflowClient(mlflow_store).get_run(record["listing_run"])  # the step's listing
    assert run.data.tags["data.source"] == "s3://datasets/pets/archive.tar.gz"


@pytest.mark.integration
def test_s3_endpoint_from_environment_and_missing_key(tmp_path, s3_endpoint, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)
    boto3.client("s3").create_bucket(Bucket="datasets-env")
    with pytest.raises(sources.DownloadError, match="s3://datasets-env/missing.zip"):
        fetch("s3://datasets-env/missing.zip", tmp_path)
    boto3.client("s3").put_object(Bucket="datasets-env", Key="big.zip", Body=PAYLOAD)
    with pytest.raises(sources.DownloadError, match=f"holds {len(PAYLOAD)} bytes, over the 1000"):
        fetch("s3://datasets-env/big.zip", tmp_path, limits=ExtractionLimits(max_bytes=1000))
    assert list((tmp_path / "cache").iterdir()) == []


def test_an_s3_endpoint_that_never_answers_is_a_clear_error_in_bounded_time(tmp_path, monkeypatch):
    for key, value in S3_KEYS.items():
        monkeypatch.setenv(key, value)
    policy = sources.RetryPolicy(attempts=1, stall_seconds=1)
    with socket.create_server(("127.0.0.1", 0)) as silent:  # connects, never answers
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(sources.DownloadError, match="cannot read s3://photos/a.zip"):
            fetching.fetch(
                "s3://photos/a.zip",
                tmp_path / "out",
                cache_dir=tmp_path / "cache",
                s3_endpoint_url=endpoint,
                retry=policy,
            )
    assert not (tmp_path / "out").exists()
