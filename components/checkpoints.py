"""Checkpoints: written atomically beside the model, copied to a durable store, found again."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from urllib.parse import urlparse

import torch

from components.atomic import atomic_file

log = logging.getLogger(__name__)

CHECKPOINT = "checkpoint.pt"


def save_checkpoint(state: dict, path: Path) -> None:
    """Write ``state`` with ``torch.save`` to ``path``, atomically."""
    with atomic_file(path) as handle:
        torch.save(state, handle)


def load_checkpoint(path: Path) -> dict:
    """Read a checkpoint onto the CPU; only tensors and plain data, never code."""
    return torch.load(path, map_location="cpu", weights_only=True)


class CheckpointStore:
    """A durable copy of the newest checkpoint, under an ``s3://`` prefix or a directory.

    The pod's own disk is gone when a retried pipeline task starts again; this is not.
    """

    def __init__(self, uri: str, s3_endpoint_url: str | None = None):
        self.uri = uri.rstrip("/")
        self._s3_endpoint_url = s3_endpoint_url
        parsed = urlparse(self.uri)
        self._bucket, self._key = (parsed.netloc, f"{parsed.path.strip('/')}/{CHECKPOINT}")
        self._is_s3 = parsed.scheme == "s3"

    def put(self, local: Path) -> None:
        if self._is_s3:
            self._client().upload_file(str(local), self._bucket, self._key)
            return
        target = Path(self.uri) / CHECKPOINT
        target.parent.mkdir(parents=True, exist_ok=True)
        with atomic_file(target) as handle, open(local, "rb") as source:
            shutil.copyfileobj(source, handle)

    def fetch(self, destination: Path) -> bool:
        """Copy the stored checkpoint to ``destination``; False when there is none yet."""
        if self._is_s3:
            from botocore.exceptions import ClientError

            try:
                self._client().download_file(self._bucket, self._key, str(destination))
            except ClientError as err:
                if err.response["Error"]["Code"] in ("404", "NoSuchKey"):
                    return False
                raise
            return True
        source = Path(self.uri) / CHECKPOINT
        if not source.is_file():
            return False
        shutil.copyfile(source, destination)
        return True

    def _client(self):
        import boto3

        return boto3.client("s3", endpoint_url=self._s3_endpoint_url)


def newest(candidates: list[dict]) -> dict | None:
    """The checkpoint with the most completed epochs, or None."""
    return max(candidates, key=lambda state: state["epoch"], default=None)
