"""Each epoch's metrics as a line Katib's StdOut metrics collector reads.

The collector keeps the lines of the trial's output that name a metric, takes an RFC 3339
time stamp from the line's first word, and reads ``name=value`` pairs with its default
filter ``([\\w|-]+)\\s*=\\s*((-?\\d+)(\\.\\d+)?)``: plain decimals only, so the values are
written with fixed decimals (``1e-05`` would read as 1), and a value that is not finite
is left out rather than written as ``nan``.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime

OBJECTIVE = "val_accuracy"
ADDITIONAL = ("val_loss", "train_loss", "train_accuracy")


def print_metrics_line(epoch: int, metrics: dict[str, float]) -> None:
    """Print the epoch's line for Katib's collector: the train step's ``on_epoch`` hook
    with ``--metrics-stdout``."""
    print(metrics_line(epoch, metrics), flush=True)


def metrics_line(epoch: int, metrics: dict[str, float], now: datetime | None = None) -> str:
    """``2026-11-25T10:00:00.000000Z epoch=3 val_accuracy=0.912300 val_loss=…``."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    pairs = [
        f"{name}={metrics[name]:.6f}"
        for name in (OBJECTIVE, *ADDITIONAL)
        if name in metrics and math.isfinite(metrics[name])
    ]
    return " ".join([stamp, f"epoch={epoch}", *pairs])
