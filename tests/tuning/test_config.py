"""The search's settings: what Katib would refuse is refused before anything is written."""

import pytest

from components.tuning.config import TuneConfig


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"parallel_trials": 5, "trials": 4}, "parallel trials <= trials"),
        ({"algorithm": "hyperband"}, "unknown algorithm"),
        ({"start_step": 0}, "start step >= 1"),
    ],
)
def test_a_search_that_cannot_run_is_refused_before_anything_is_written(settings, expected):
    with pytest.raises(ValueError, match=expected):
        TuneConfig(**settings)
