"""How much a test figure can be trusted: what it is at least, given how many photos it
was measured on."""

from __future__ import annotations

import math

Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval


def accuracy_at_least(accuracy: float, count: int, z: float = Z_95) -> float:
    """The lower end of the Wilson score interval of ``accuracy`` measured on ``count``
    photos: 95% of the time the accuracy on further photos of the same kind is above it.
    1.0 on 2 photos is at least 0.34; 0.9883 on 2,300 at least 0.9830."""
    if count <= 0:
        return 0.0
    spread = z * z / count
    centre = accuracy + spread / 2
    margin = z * math.sqrt(accuracy * (1 - accuracy) / count + spread / (4 * count))
    return max(0.0, (centre - margin) / (1 + spread))
