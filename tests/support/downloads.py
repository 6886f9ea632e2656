"""What the download tests share: a small archive, its digest, a quick retry policy."""

from __future__ import annotations

import hashlib

from components.data import sources
from components.downloading import fetch as fetching
from tests.support.helpers import zip_bytes

FAST = sources.RetryPolicy(attempts=4, backoff_seconds=0.01, stall_seconds=10)
PAYLOAD = zip_bytes({f"PetImages/Cat/{i}.jpg": bytes([i]) * 50_000 for i in range(8)})
DIGEST = hashlib.sha256(PAYLOAD).hexdigest()


def fetch(source, tmp_path, **kwargs):
    return fetching.fetch(
        source, tmp_path / "out", cache_dir=tmp_path / "cache", retry=FAST, **kwargs
    )
