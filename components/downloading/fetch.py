"""The download step's work: fetch a source, verify it, extract it into the output."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from urllib.parse import urlparse

from components.core.atomic import MARKER, STAGING, atomic_directory, check_replaceable, write_json
from components.core.cache import cache_dir as default_cache_dir
from components.core.names import DOWNLOAD_RECORD
from components.core.uris import redact
from components.data import archives, sources
from components.data.test_share import list_source
from components.downloading.config import DownloadConfig, check_sha256

log = logging.getLogger(__name__)

RECORD = DOWNLOAD_RECORD
LISTING = "listing.json"  # every file extracted, with its sha256 and size


def download(cfg: DownloadConfig) -> DownloadRecord:
    """The download step: ``cfg.source`` fetched into ``cfg.output`` within its limits,
    its listing recorded in the tracking store (``MLFLOW_TRACKING_URI``), in
    ``cfg.experiment``."""
    from components.tracking.source_listing import record_listing  # mlflow: for this only

    return fetch(
        cfg.source,
        Path(cfg.output),
        sha256=cfg.sha256 or None,
        s3_endpoint_url=cfg.s3_endpoint_url,
        cache_dir=Path(cfg.cache_dir) if cfg.cache_dir else None,
        retry=sources.RetryPolicy(
            attempts=cfg.retries,
            stall_seconds=cfg.stall_seconds,
            deadline_seconds=cfg.deadline_seconds,
        ),
        limits=archives.ExtractionLimits(cfg.max_files, cfg.max_bytes, cfg.max_ratio),
        record_listing=lambda data: record_listing(data, redact(cfg.source), cfg.experiment),
    )


@dataclass(frozen=True)
class DownloadRecord:
    """What ``download.json`` says about the extracted data."""

    source: str
    bytes: int
    sha256: str | None
    file_count: int
    listing: str | None = None  # the sha256 of listing.json: every file with its sha256
    listing_run: str | None = None  # the MLflow run that records the listing


def fetch(
    source: str,
    output: Path,
    *,
    sha256: str | None = None,
    s3_endpoint_url: str | None = None,
    cache_dir: Path | None = None,
    retry: sources.RetryPolicy = sources.RetryPolicy(),
    limits: archives.ExtractionLimits = archives.ExtractionLimits(),
    record_listing: Callable[[bytes], str] | None = None,
) -> DownloadRecord:
    """Fetch ``source`` into ``output``: an extracted archive or a copied directory.

    ``output`` is replaced whole, or left untouched on any error. A previous
    output of the same source with the same verified digest is reused as it is.

    Args:
        source: https://, http://, s3://BUCKET/KEY, file:// or a path.
        output: the directory to extract into.
        sha256: the archive's expected digest; None: only recorded.
        s3_endpoint_url: an S3 endpoint such as MinIO's; None: ``$AWS_ENDPOINT_URL``.
        cache_dir: where downloads are kept and resumed.
        retry: attempts, back-off, stall timeout and deadline of a download.
        limits: the most files and bytes an archive may expand to; a download may
            bring no more bytes than it may expand to either.
        record_listing: records the listing of every file extracted (``listing.json``)
            where it is vouched for (the tracking store); returns the record's id.

    Returns:
        What was fetched: source, bytes, sha256 and file count (``download.json``).
    """
    output = Path(output)
    check_sha256(sha256)
    check_replaceable(output, "download")  # at once, not after the download
    previous = _reusable_record(output, source, sha256)
    if previous and (previous.listing_run or not record_listing):
        log.info("reusing %s: it already holds %s (sha256 %s)", output, redact(source), sha256)
        return previous
    if sources.is_remote(source):
        archive = _cached_archive(
            source, sha256, s3_endpoint_url, cache_dir, retry, limits.max_bytes
        )
    else:
        sources.check_local_source(source)
        archive = sources.local_path(source)
    try:
        with atomic_directory(output, "download") as staging:
            record = _unpack(source, archive, staging, sha256, limits)
            listing = list_source(staging, leave_out=(MARKER, STAGING)).to_bytes()
            (staging / LISTING).write_bytes(listing)
            record = replace(record, listing=hashlib.sha256(listing).hexdigest())
            if record_listing:
                record = replace(record, listing_run=record_listing(listing))
            write_json(staging / RECORD, asdict(record))
    except ValueError:
        if sources.is_remote(source) and not sha256:
            # no digest vouches for it: whatever the server sent is not kept for next time
            archive.unlink(missing_ok=True)
        raise
    log.info("extracted %d files from %s into %s", record.file_count, redact(source), output)
    return record


def _reusable_record(output: Path, source: str, sha256: str | None) -> DownloadRecord | None:
    path = output / RECORD
    if not sha256 or not path.is_file():
        return None
    try:
        record = DownloadRecord(**json.loads(path.read_text()))
    except (ValueError, TypeError) as err:
        log.warning("not reusing %s: %s does not read as a download record (%s)", output, path, err)
        return None
    if record.source == redact(source) and record.sha256 == sha256.lower():
        return record
    return None


def _cached_archive(
    source: str,
    sha256: str | None,
    s3_endpoint_url: str | None,
    cache_dir: Path | None,
    retry: sources.RetryPolicy,
    max_bytes: int,
) -> Path:
    """The archive in the cache, downloaded unless a copy with the wanted digest is there."""
    name = Path(urlparse(source).path).name or "archive"
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    archive = (cache_dir or default_cache_dir()) / f"{key}-{name}"
    if sha256 and archive.is_file() and sources.sha256_of(archive) == sha256.lower():
        log.info("reusing the cached archive %s", archive)
        return archive
    sources.fetch_remote(
        source,
        archive,
        sha256=sha256,
        s3_endpoint_url=s3_endpoint_url,
        retry=retry,
        max_bytes=max_bytes,
    )
    return archive


def _unpack(
    source: str,
    archive: Path,
    target: Path,
    sha256: str | None,
    limits: archives.ExtractionLimits,
) -> DownloadRecord:
    if archive.is_dir():
        if sha256:
            raise ValueError(
                f"a sha256 applies to an archive file; {redact(source)} is a directory"
            )
        count = archives.copy_tree(archive, target, limits)
        size = sum(p.stat().st_size for p in target.rglob("*") if p.is_file())
        return DownloadRecord(source=redact(source), bytes=size, sha256=None, file_count=count)
    digest = sources.verify_digest(archive, sha256, source)
    count = archives.extract(archive, target, limits)
    if count == 0:
        raise ValueError(
            f"expected photos in the archive from {redact(source)}, found no files in it"
        )
    return DownloadRecord(
        source=redact(source), bytes=archive.stat().st_size, sha256=digest, file_count=count
    )
