"""Progress on long work: a bar on a terminal, and where asked a log line at each tenth
done, so that pod and CI logs show a long pass moving without a bar's redraws."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator
from typing import Any, TypeVar

from tqdm import tqdm

log = logging.getLogger(__name__)
T = TypeVar("T")


def progress(iterable: Iterable[Any] | None = None, **options: Any) -> tqdm[Any]:
    """A tqdm bar, redrawn at most once a second, silent when stderr is not a terminal."""
    options.setdefault("disable", None)  # None: off when not a terminal
    return tqdm(iterable, mininterval=1, **options)


def logged(items: Iterable[T], total: int, what: str, unit: str) -> Iterator[T]:
    """``items``, with a log line each time another tenth of ``total`` is done: how many,
    and the time so far."""
    started, next_tenth = time.perf_counter(), 1
    for done, item in enumerate(items, 1):
        yield item
        if total and done * 10 >= next_tenth * total:
            seconds = time.perf_counter() - started
            log.info(
                "%s: %d of %d %s (%d%%) in %.0f s", what, done, total, unit,
                100 * done // total, seconds,
            )  # fmt: skip
            next_tenth = 10 * done // total + 1
