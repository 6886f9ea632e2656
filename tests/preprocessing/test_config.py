"""The preprocess step's schema: shapes and split fractions it can make, or a refusal."""

from __future__ import annotations

import pytest

from components.preprocessing.config import PreprocessConfig


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"channels": 2}, "expected channels 1 or 3"),
        ({"val_fraction": 0.5, "test_fraction": 0.5}, "sum to less than 1"),
        ({"image_size": 4}, "expected an image size from 8 to 512, found 4"),
        ({"image_size": 10000}, "expected an image size from 8 to 512, found 10000"),
        ({"workers": -1}, "expected 0 or more workers"),
        ({"val_fraction": float("nan")}, "found val=nan, test=0.1"),
        ({"test_fraction": -0.1}, "fractions >= 0"),
    ],
)
def test_bad_config_is_a_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PreprocessConfig(input="in", output="out", **kwargs)
