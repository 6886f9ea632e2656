"""Katib's StdOut metrics collector's parsing rule, to test the trial's output against.

A port of kubeflow/katib ``pkg/metricscollector/v1beta1/file-metricscollector``
(``parseLogsInTextFormat`` with ``common.DefaultFilter``, v0.19): a line that names none
of the metrics is skipped; its first word is the time stamp when it parses as RFC 3339;
every ``name=value`` match of the filter whose name is a metric is one observation. Go's
``\\w`` is ASCII, hence ``re.ASCII``.
"""

from __future__ import annotations

import re
from datetime import datetime

DEFAULT_FILTER = re.compile(r"([\w|-]+)\s*=\s*((-?\d+)(\.\d+)?)", re.ASCII)
UNAVAILABLE = "unavailable"


def parse(text: str, metrics: list[str]) -> list[tuple[str | None, str, str]]:
    """(time stamp or None, name, value) for each observation, in order."""
    observations = []
    for line in text.split("\n"):
        if not any(metric in line for metric in metrics):
            continue
        first, sep, _ = line.partition(" ")
        stamp = first if sep and _is_rfc3339(first) else None
        for match in DEFAULT_FILTER.finditer(line):
            name, value = match[1].strip(), match[2].strip()
            if name in metrics:
                observations.append((stamp, name, value))
    if not any(name == metrics[0] for _, name, _ in observations):
        return [(None, metrics[0], UNAVAILABLE)]  # Katib records the objective unavailable
    return observations


def _is_rfc3339(text: str) -> bool:
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return "T" in text
