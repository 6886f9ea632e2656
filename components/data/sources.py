"""Fetch a source URI (https, http, s3, file, or a plain path) to a verified local file."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import requests
from tqdm import tqdm

log = logging.getLogger(__name__)

RETRYABLE_STATUS = {408, 425, 429, 500, 502, 503, 504}
REMOTE_SCHEMES = ("http", "https", "s3")


class DownloadError(RuntimeError):
    """A source could not be fetched; the message says why and what was tried."""


class DigestMismatchError(ValueError):
    """The fetched bytes do not have the sha256 the caller asked for."""


class _TransientError(Exception):
    """A failure worth another attempt: 5xx, a dropped connection, a short body."""


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try a flaky server: attempts, exponential backoff, per-request timeout."""

    attempts: int = 5
    backoff_seconds: float = 2.0
    timeout_seconds: float = 60.0


def is_remote(source: str) -> bool:
    return urlparse(source).scheme in REMOTE_SCHEMES


def local_path(source: str) -> Path:
    """The filesystem path of a ``file://`` URI or a plain path."""
    parsed = urlparse(source)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:
        raise ValueError(
            f"expected a source of https://, http://, s3://, file:// or a path, found {source!r}"
        )
    return Path(source)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify_digest(path: Path, expected: str | None, source: str) -> str:
    """Return the file's sha256; raise if ``expected`` is given and differs."""
    actual = sha256_of(path)
    if expected and actual != expected.lower():
        raise DigestMismatchError(
            f"sha256 mismatch for {source}: expected {expected.lower()}, found {actual}"
        )
    return actual


def fetch_remote(
    source: str,
    destination: Path,
    *,
    sha256: str | None = None,
    s3_endpoint_url: str | None = None,
    retry: RetryPolicy = RetryPolicy(),
) -> str:
    """Download ``source`` to ``destination`` through ``destination.part``; return its sha256.

    The ``.part`` file is kept between attempts (and runs) so HTTP downloads resume;
    it becomes ``destination`` only once complete and verified, and is deleted when
    the digest does not match.
    """
    part = destination.with_name(destination.name + ".part")
    destination.parent.mkdir(parents=True, exist_ok=True)
    if urlparse(source).scheme == "s3":
        _fetch_s3(source, part, s3_endpoint_url)
    else:
        _fetch_http(source, part, retry)
    try:
        digest = verify_digest(part, sha256, source)
    except DigestMismatchError:
        part.unlink(missing_ok=True)
        raise
    os.replace(part, destination)
    return digest


def _fetch_http(url: str, part: Path, retry: RetryPolicy) -> None:
    for attempt in range(1, retry.attempts + 1):
        try:
            _http_attempt(url, part, retry.timeout_seconds)
            return
        except (_TransientError, requests.ConnectionError, requests.Timeout) as err:
            if attempt == retry.attempts:
                raise DownloadError(f"gave up on {url} after {attempt} attempts: {err}") from err
            delay = retry.backoff_seconds * 2 ** (attempt - 1)
            log.warning(
                "attempt %d/%d at %s failed (%s); retrying in %.1fs",
                attempt,
                retry.attempts,
                url,
                err,
                delay,
            )
            time.sleep(delay)


def _http_attempt(url: str, part: Path, timeout: float) -> None:
    offset = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={offset}-"} if offset else {}
    with requests.get(url, headers=headers, stream=True, timeout=timeout) as response:
        if response.status_code == 416:
            part.unlink()
            raise _TransientError("server refused the resume range; starting over")
        if response.status_code in RETRYABLE_STATUS:
            raise _TransientError(f"HTTP {response.status_code} {response.reason}")
        if response.status_code >= 400:
            raise DownloadError(f"HTTP {response.status_code} {response.reason} from {url}")
        resumed = response.status_code == 206 and _range_start(response) == offset
        if offset and not resumed:
            log.info("server ignored the Range request; downloading %s from the start", url)
            offset = 0
        length = response.headers.get("Content-Length")
        total = offset + int(length) if length is not None else None
        _stream_to(response, part, "ab" if resumed else "wb", offset, total)
    size = part.stat().st_size
    if total is not None and size < total:
        raise _TransientError(f"connection closed after {size} of {total} bytes")


def _range_start(response: requests.Response) -> int:
    """The first byte of a ``Content-Range: bytes START-END/TOTAL`` header, or -1."""
    value = response.headers.get("Content-Range", "")
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return -1


def _stream_to(
    response: requests.Response, part: Path, mode: str, offset: int, total: int | None
) -> None:
    with (
        open(part, mode) as handle,
        tqdm(
            total=total, initial=offset, unit="B", unit_scale=True, desc=part.stem, mininterval=1
        ) as bar,
    ):
        try:
            for chunk in response.iter_content(chunk_size=1 << 16):
                handle.write(chunk)
                bar.update(len(chunk))
        except (requests.exceptions.ChunkedEncodingError, requests.ConnectionError) as err:
            raise _TransientError(f"connection dropped: {err}") from err


def _fetch_s3(uri: str, part: Path, endpoint_url: str | None) -> None:
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    parsed = urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if not bucket or not key:
        raise ValueError(f"expected s3://BUCKET/KEY, found {uri!r}")
    client = boto3.client("s3", endpoint_url=endpoint_url)
    try:
        size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
        with tqdm(total=size, unit="B", unit_scale=True, desc=key, mininterval=1) as bar:
            client.download_file(bucket, key, str(part), Callback=bar.update)
    except ClientError as err:
        raise DownloadError(f"cannot read {uri}: {err}") from err
    except BotoCoreError as err:
        raise DownloadError(
            f"cannot read {uri}: {err} (credentials come from AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY, the endpoint from AWS_ENDPOINT_URL or --s3-endpoint-url)"
        ) from err
