"""The download step's schema: where the photos come from and how they are fetched."""

from __future__ import annotations

import re
from dataclasses import dataclass

from components.core.names import DEFAULT_EXPERIMENT
from components.core.schema import LOCAL, PER_RUN, setting
from components.data import archives, sources

PETIMAGES_URL = (
    "https://download.microsoft.com/download/3/E/1/"
    "3E1C3F21-ECDB-4869-8368-6DEBA77B919F/kagglecatsanddogs_5340.zip"
)
SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")


def check_sha256(sha256: str | None) -> None:
    """Refuse a digest that cannot be a sha256 before anything is downloaded."""
    if sha256 and not SHA256_HEX.fullmatch(sha256):
        raise ValueError(f"expected a sha256 of 64 hex digits (or none), found {sha256!r}")


@dataclass(frozen=True)
class DownloadConfig:
    """Where the photos come from and how to fetch them: the download step's schema."""

    output: str = setting(help="directory to extract into; replaced whole on success", role=LOCAL)
    source: str = setting(
        PETIMAGES_URL,
        "https://, http://, s3://BUCKET/KEY, file:// or a path to a .zip, .tar.gz or directory",
        role=PER_RUN,
    )
    sha256: str = setting(
        "",
        "expected sha256 of the archive, a mismatch is an error; empty: only recorded",
        role=PER_RUN,
    )
    experiment: str = setting(
        DEFAULT_EXPERIMENT, "MLflow experiment the source listing is recorded in", role=PER_RUN
    )
    s3_endpoint_url: str | None = setting(
        None, "S3 endpoint for MinIO and the like ($AWS_ENDPOINT_URL when unset)", role=LOCAL
    )
    cache_dir: str | None = setting(
        None,
        "where downloaded archives are kept and resumed (unset: $XDG_CACHE_HOME/dogs-vs-cats "
        "or ~/.cache/dogs-vs-cats)",
        role=LOCAL,
    )
    retries: int = setting(
        5,
        "attempts per download; a server or S3 endpoint that never answers is given up "
        "after retries × stall-seconds plus back-off (about 3 minutes at the defaults)",
        role=LOCAL,
    )
    stall_seconds: float = setting(
        sources.RetryPolicy.stall_seconds,
        "an attempt that receives less than 64 KiB in this time has stalled and is retried",
        role=LOCAL,
    )
    deadline_seconds: float = setting(
        sources.RetryPolicy.deadline_seconds,
        "the whole download, all attempts and back-offs, ends with an error after this",
        role=LOCAL,
    )
    max_files: int = setting(
        archives.ExtractionLimits.max_files, "most files an archive may hold", role=LOCAL
    )
    max_bytes: int = setting(
        archives.ExtractionLimits.max_bytes,
        "most bytes an archive may expand to, and a download may bring",
        role=LOCAL,
    )
    max_ratio: float = setting(
        archives.ExtractionLimits.max_ratio,
        "most uncompressed bytes per archive byte (archive bombs)",
        role=LOCAL,
    )

    def __post_init__(self) -> None:
        check_sha256(self.sha256)
        limits = {
            "retries": self.retries,
            "stall_seconds": self.stall_seconds,
            "deadline_seconds": self.deadline_seconds,
            "max_files": self.max_files,
            "max_bytes": self.max_bytes,
            "max_ratio": self.max_ratio,
        }
        wrong = [f"{name}={value}" for name, value in limits.items() if not value > 0]  # NaN too
        if wrong:
            raise ValueError(f"expected {', '.join(limits)} above 0, found {', '.join(wrong)}")
