"""What a test figure is at least, given the photos it was measured on."""

from __future__ import annotations

import math

import numpy as np
import pytest

from components.registration.confidence import accuracy_at_least


def test_a_figure_on_a_handful_of_photos_says_little_and_on_thousands_a_lot():
    assert accuracy_at_least(1.0, 2) == pytest.approx(0.3424, abs=1e-4)  # 2 of 2 right
    assert accuracy_at_least(0.9883, 2300) == pytest.approx(0.9830, abs=1e-4)
    assert accuracy_at_least(0.5, 0) == 0.0


@pytest.mark.parametrize(("right", "count"), [(0, 10), (7, 10), (170, 200), (2273, 2300)])
def test_the_bound_is_wilsons_lower_end(right, count):
    """Held to the Wilson score interval written out: p̂ + z²/2n − z·√(p̂(1−p̂)/n + z²/4n²),
    over 1 + z²/n, with z the 97.5% normal quantile."""
    z, p = 1.959964, right / count
    expected = (
        p + z * z / (2 * count) - z * math.sqrt(p * (1 - p) / count + z * z / (4 * count**2))
    ) / (1 + z * z / count)
    assert accuracy_at_least(p, count) == pytest.approx(max(expected, 0.0), abs=1e-12)


def test_the_bound_holds_for_95_percent_of_samples():
    """Draws of 200 photos from a model right 85% of the time: the bound falls below 0.85
    in about 95% of them."""
    rng = np.random.default_rng(0)
    below = [accuracy_at_least(rng.binomial(200, 0.85) / 200, 200) <= 0.85 for _ in range(4000)]
    assert 0.93 < np.mean(below) < 0.97


def test_mcnemar_counts_only_the_photos_one_model_alone_got_right():
    from components.registration.confidence import better_beyond_chance

    assert better_beyond_chance({1, 2, 3}, {1, 2, 3}) == (False, 1.0)  # no photo apart
    beyond, p_value = better_beyond_chance(set(), {1, 2, 3, 4, 5})  # 5 to 0
    assert beyond and p_value == pytest.approx(1 / 32)
    beyond, p_value = better_beyond_chance({9}, {1, 2, 3, 4, 5})  # 5 to 1
    assert not beyond and p_value == pytest.approx(7 / 64)
