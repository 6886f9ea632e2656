"""Progress bars on long work: on a terminal only, so pod and CI logs stay readable."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tqdm import tqdm


def progress(iterable: Iterable[Any] | None = None, **options: Any) -> tqdm[Any]:
    """A tqdm bar, redrawn at most once a second, silent when stderr is not a terminal."""
    options.setdefault("disable", None)  # None: off when not a terminal
    return tqdm(iterable, mininterval=1, **options)
