"""S3 clients with bounded waits: a bucket that stops answering is an error, not a hang."""

from __future__ import annotations

from typing import Any


def client(endpoint_url: str | None = None, *, timeout: float = 60.0, attempts: int = 5) -> Any:
    """A boto3 S3 client; the endpoint from ``$AWS_ENDPOINT_URL`` when None (MinIO and the like).

    Each connect and read waits at most ``timeout`` seconds; botocore's standard mode
    retries throttling and transient errors, ``attempts`` tries in all.
    """
    import boto3
    from botocore.config import Config

    config = Config(
        connect_timeout=timeout,
        read_timeout=timeout,
        retries={"max_attempts": attempts, "mode": "standard"},
    )
    return boto3.client("s3", endpoint_url=endpoint_url, config=config)
