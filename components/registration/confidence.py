"""How much a test figure can be trusted: what it is at least, given how many photos it
was measured on."""

from __future__ import annotations

import math

Z_95 = 1.959964  # the normal quantile of a two-sided 95% interval
ALPHA = 0.05  # how rarely chance may make a challenger look better


def better_beyond_chance(ours_wrong: set[int], theirs_wrong: set[int]) -> tuple[bool, float]:
    """Whether the model that got ``ours_wrong`` wrong is better than the one that got
    ``theirs_wrong`` wrong, on the same photos, beyond chance: McNemar's exact test, one
    sided at 5%, on the photos only one of them got right. Returns the verdict and the
    test's p-value (the chance of so lopsided a split if the two were as good)."""
    ours_only = len(theirs_wrong - ours_wrong)  # right by us alone
    theirs_only = len(ours_wrong - theirs_wrong)
    split = ours_only + theirs_only
    p_value = sum(math.comb(split, k) for k in range(ours_only, split + 1)) / 2**split
    return p_value < ALPHA, p_value


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
