"""The folder this project keeps what it can make again: downloads, exported graphs."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/dogs-vs-cats``, else ``~/.cache/dogs-vs-cats``."""
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dogs-vs-cats"
