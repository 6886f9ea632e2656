"""Fetch a source URI (https, http, s3, file, or a plain path) to a verified local file."""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import requests
import urllib3
from urllib3.exceptions import MaxRetryError
from urllib3.util import Retry

from components.core import s3
from components.core.atomic import write_json
from components.core.progress import progress
from components.core.uris import redact

log = logging.getLogger(__name__)

STALL_BYTES = 1 << 16
RETRYABLE_STATUS = {408, 425, 429, 500, 502, 503, 504}
REMOTE_SCHEMES = ("http", "https", "s3")


class DownloadError(RuntimeError):
    """A source could not be fetched; the message says why and what was tried."""


class DownloadTooLargeError(DownloadError):
    """The source is, or streams, more bytes than a download may bring."""


class DigestMismatchError(ValueError):
    """The fetched bytes do not have the sha256 the caller asked for."""


class _TransientError(Exception):
    """A failure worth another attempt: a 5xx or 429 (``response``: urllib3's, for its
    Retry-After), a stall, a short body, a refused resume."""

    def __init__(self, message: str, response: urllib3.BaseHTTPResponse | None = None):
        super().__init__(message)
        self.response = response


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try a flaky server.

    ``attempts`` in all, counted, spaced and told apart by urllib3's ``Retry`` (retryable
    statuses, exponential back-off from ``backoff_seconds``, a server's ``Retry-After``);
    an attempt that receives less than 64 KiB in ``stall_seconds`` has stalled, and the
    whole download, back-offs included, ends at ``deadline_seconds``.
    """

    attempts: int = 5
    backoff_seconds: float = 2.0
    stall_seconds: float = 30.0
    deadline_seconds: float = 3 * 3600.0

    def retry(self) -> Retry:
        """urllib3's retry state for one download: every failure counts toward
        ``attempts``; an attempt that got a response waits as long as it asks."""
        return Retry(
            total=self.attempts - 1,
            status_forcelist=RETRYABLE_STATUS,
            backoff_factor=self.backoff_seconds,
            respect_retry_after_header=True,
            raise_on_status=False,
        )


def is_remote(source: str) -> bool:
    return urlparse(source).scheme in REMOTE_SCHEMES


def local_path(source: str) -> Path:
    """The filesystem path of a ``file://`` URI or a plain path."""
    parsed = urlparse(source)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme and len(parsed.scheme) > 1:
        raise ValueError(
            "expected a source of https://, http://, s3://, file:// or a path, found "
            f"{redact(source)!r}"
        )
    return Path(source)


ARCHIVE_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")


def check_local_source(source: str) -> None:
    """Refuse a local source that is not there, naming the close names beside it: at
    once, before a pipeline starts, not minutes later in its download task.

    Raises:
        FileNotFoundError: nothing at the source's path.
    """
    if not source or is_remote(source):
        return
    path = local_path(source)
    if path.exists():
        return
    folder = path.parent
    # what a source can be: a folder, or an archive (not its .sha256 beside it, say)
    names = [
        entry.name
        for entry in (folder.iterdir() if folder.is_dir() else [])
        if entry.is_dir() or entry.name.endswith(ARCHIVE_SUFFIXES)
    ]
    close = [str(folder / name) for name in difflib.get_close_matches(path.name, names, n=3)]
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    raise FileNotFoundError(
        f"expected the source as a .zip, .tar.gz or folder at {path}, found nothing there{hint}"
    )


def sha256_of(path: Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def verify_digest(path: Path, expected: str | None, source: str) -> str:
    """Return the file's sha256; raise if ``expected`` is given and differs."""
    actual = sha256_of(path)
    if expected and actual != expected.lower():
        raise DigestMismatchError(
            f"sha256 mismatch for {redact(source)}: expected {expected.lower()}, found {actual}"
        )
    return actual


def fetch_remote(
    source: str,
    destination: Path,
    *,
    max_bytes: int,
    sha256: str | None = None,
    s3_endpoint_url: str | None = None,
    retry: RetryPolicy = RetryPolicy(),
) -> str:
    """Download ``source`` to ``destination`` through ``destination.part``; return its sha256.

    The ``.part`` file is kept between attempts (and runs) so HTTP downloads resume,
    but only from the same version of the file: the resume asks with ``If-Range`` for
    the ETag or Last-Modified date the first response carried. The ``.part`` becomes
    ``destination`` only once complete and verified, and is deleted when the digest
    does not match or the source is over ``max_bytes`` (announced or streamed).
    """
    part = destination.with_name(destination.name + ".part")
    destination.parent.mkdir(parents=True, exist_ok=True)
    try:
        if urlparse(source).scheme == "s3":
            _fetch_s3(source, part, s3_endpoint_url, retry, max_bytes)
        else:
            _fetch_http(source, part, retry, max_bytes)
        digest = verify_digest(part, sha256, source)
    except (DigestMismatchError, DownloadTooLargeError):
        discard_partial(part)
        raise
    os.replace(part, destination)
    _version_file(part).unlink(missing_ok=True)
    return digest


def discard_partial(part: Path) -> None:
    """Delete a partial download and the version it was resumed against."""
    part.unlink(missing_ok=True)
    _version_file(part).unlink(missing_ok=True)


def _version_file(part: Path) -> Path:
    return part.with_name(part.name + ".version.json")


def _check_size(source: str, size: int, max_bytes: int, verb: str) -> None:
    if size > max_bytes:
        raise DownloadTooLargeError(
            f"refusing {redact(source)}: it {verb} {size} bytes, over the {max_bytes} a "
            "download may bring (--max-bytes)"
        )


def _fetch_http(url: str, part: Path, policy: RetryPolicy, max_bytes: int) -> None:
    deadline = time.monotonic() + policy.deadline_seconds
    retry, attempt = policy.retry(), 0
    while True:
        attempt += 1
        try:
            _http_attempt(url, part, policy.stall_seconds, deadline, max_bytes)
            return
        except (_TransientError, requests.ConnectionError, requests.Timeout) as err:
            response = err.response if isinstance(err, _TransientError) else None
            try:  # a response counts by its status, anything else as an error
                retry = retry.increment(
                    "GET", url, response=response, error=None if response else err
                )
            except MaxRetryError:
                raise DownloadError(
                    f"gave up on {redact(url)} after {attempt} attempts: {err}"
                ) from err
            asked = retry.get_retry_after(response) if response is not None else None
            delay = asked if asked is not None else retry.get_backoff_time()
            if time.monotonic() + delay >= deadline:
                raise DownloadError(
                    f"gave up on {redact(url)} after {attempt} attempts: its deadline of "
                    f"{policy.deadline_seconds:g}s (--deadline-seconds) comes before the "
                    f"next attempt; the last one failed with: {err}"
                ) from err
            log.warning(
                "attempt %d/%d at %s failed (%s); retrying in %.1fs",
                attempt,
                policy.attempts,
                redact(url),
                err,
                delay,
            )
            time.sleep(delay)
        except requests.RequestException as err:  # redirects to ftp:// or file://, or in a loop
            raise DownloadError(
                f"cannot download {redact(url)}: {type(err).__name__}: {err}"
            ) from err


def _http_attempt(
    url: str, part: Path, stall_seconds: float, deadline: float, max_bytes: int
) -> None:
    version = _resumable_version(url, part)
    offset = part.stat().st_size if version else 0
    # the file's own bytes: what the digest, the length and a resumed range refer to
    headers = {"Accept-Encoding": "identity"}
    if version and offset:
        headers |= {"Range": f"bytes={offset}-", "If-Range": version["validator"]}
    timeout = min(stall_seconds, max(deadline - time.monotonic(), 0.1))
    with requests.get(url, headers=headers, stream=True, timeout=timeout) as response:
        if response.status_code == 416:
            discard_partial(part)
            raise _TransientError("server refused the resume range; starting over")
        if response.status_code in RETRYABLE_STATUS:
            raise _TransientError(f"HTTP {response.status_code} {response.reason}", response.raw)
        if response.status_code >= 400:
            raise DownloadError(f"HTTP {response.status_code} {response.reason} from {redact(url)}")
        encoding = response.headers.get("Content-Encoding", "identity")
        if encoding.lower() != "identity":
            raise DownloadError(
                f"{redact(url)} came {encoding}-encoded although the file's own bytes were asked "
                "for (Accept-Encoding: identity); a proxy or server re-encodes it"
            )
        total = _content_total(response)
        if total is not None:
            _check_size(url, total, max_bytes, "announces")
        resumed = (
            version is not None
            and offset > 0
            and response.status_code == 206
            and _range_start(response) == offset
            and total == version["total"]
        )
        if offset and not resumed:
            log.info("%s changed or ignores ranges; downloading it from the start", url)
            offset = 0
        if not resumed:
            write_json(
                _version_file(part), {"url": url, "validator": _validator(response), "total": total}
            )
        _stream_to(
            response,
            part,
            "ab" if resumed else "wb",
            offset,
            total,
            stall_seconds,
            deadline,
            max_bytes,
        )
    size = part.stat().st_size
    if total is not None and size != total:
        raise _TransientError(f"the body ended after {size} of the {total} bytes announced")


def _resumable_version(url: str, part: Path) -> dict[str, Any] | None:
    """The recorded version of a partial download of ``url`` that a resume can ask for."""
    path = _version_file(part)
    if not part.is_file() or not path.is_file():
        return None
    try:
        version = json.loads(path.read_text())
    except ValueError:
        return None
    if not isinstance(version, dict) or version.get("url") != url:
        return None
    if not (version.get("validator") and "total" in version):
        return None
    return version


def _validator(response: requests.Response) -> str | None:
    """A strong ETag, else Last-Modified: what ``If-Range`` may carry (RFC 9110, 13.1.5)."""
    etag = response.headers.get("ETag")
    if etag and not etag.startswith("W/"):
        return etag
    return response.headers.get("Last-Modified")


def _content_total(response: requests.Response) -> int | None:
    """The full file's size: from ``Content-Range`` on a 206, else ``Content-Length``."""
    if response.status_code == 206:
        value = response.headers.get("Content-Range", "")
        total = value.rpartition("/")[2]
        return int(total) if total.isdigit() else None
    length = response.headers.get("Content-Length")
    return int(length) if length and length.isdigit() else None


def _range_start(response: requests.Response) -> int:
    """The first byte of a ``Content-Range: bytes START-END/TOTAL`` header, or -1."""
    value = response.headers.get("Content-Range", "")
    try:
        return int(value.split()[1].split("-")[0])
    except (IndexError, ValueError):
        return -1


def _stream_to(
    response: requests.Response,
    part: Path,
    mode: str,
    offset: int,
    total: int | None,
    stall_seconds: float,
    deadline: float,
    max_bytes: int,
) -> None:
    """Append the body to ``part``, failing on a stall, a deadline or a body too long.

    ``read1`` returns what one socket read brings, so a server that trickles bytes is
    seen trickling rather than hiding inside a read that waits for a full chunk.
    """
    watch = _Progress(stall_seconds)
    with (
        open(part, mode) as handle,
        progress(total=total, initial=offset, unit="B", unit_scale=True, desc=part.stem) as bar,
    ):
        try:
            while chunk := response.raw.read1(1 << 16):
                handle.write(chunk)
                bar.update(len(chunk))
                offset += len(chunk)
                if total is not None and offset > total:
                    raise _TransientError(f"the body is longer than the {total} bytes announced")
                _check_size(response.url, offset, max_bytes, "streams at least")
                if time.monotonic() > deadline:
                    raise DownloadError(
                        f"gave up on {response.url}: its deadline passed after {offset} bytes "
                        "(--deadline-seconds)"
                    )
                watch.add(len(chunk))
        except (
            requests.exceptions.ChunkedEncodingError,
            requests.ConnectionError,
            urllib3.exceptions.HTTPError,
        ) as err:
            raise _TransientError(f"connection dropped: {err}") from err


class _Progress:
    """Raises when less than STALL_BYTES arrived in the last ``stall_seconds``."""

    def __init__(self, stall_seconds: float):
        self.stall_seconds = stall_seconds
        self.window_start = time.monotonic()
        self.window_bytes = 0

    def add(self, count: int) -> None:
        self.window_bytes += count
        now = time.monotonic()
        if self.window_bytes >= STALL_BYTES:
            self.window_start, self.window_bytes = now, 0
        elif now - self.window_start > self.stall_seconds:
            raise _TransientError(
                f"stalled: {self.window_bytes} bytes in {now - self.window_start:.0f}s "
                f"(--stall-seconds {self.stall_seconds:g})"
            )


def _fetch_s3(
    uri: str, part: Path, endpoint_url: str | None, retry: RetryPolicy, max_bytes: int
) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    parsed = urlparse(uri)
    bucket, key = parsed.netloc, parsed.path.lstrip("/")
    if not bucket or not key:
        raise ValueError(f"expected s3://BUCKET/KEY, found {redact(uri)!r}")
    client = s3.client(endpoint_url, timeout=retry.stall_seconds, attempts=retry.attempts)
    try:
        size = client.head_object(Bucket=bucket, Key=key)["ContentLength"]
        _check_size(uri, size, max_bytes, "holds")
        with progress(total=size, unit="B", unit_scale=True, desc=key) as bar:
            client.download_file(bucket, key, str(part), Callback=bar.update)
    except ClientError as err:
        raise DownloadError(f"cannot read {redact(uri)}: {err}") from err
    except BotoCoreError as err:
        raise DownloadError(
            f"cannot read {redact(uri)}: {err} (credentials come from AWS_ACCESS_KEY_ID/"
            "AWS_SECRET_ACCESS_KEY, the endpoint from AWS_ENDPOINT_URL or --s3-endpoint-url)"
        ) from err
