"""The download step's schema: limits above 0 and a digest of 64 hex digits, or a refusal."""

from __future__ import annotations

import pytest

from components.downloading.config import DownloadConfig

NAN = float("nan")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"retries": 0}, "above 0, found retries=0$"),
        ({"stall_seconds": -1, "max_ratio": NAN}, "found stall_seconds=-1, max_ratio=nan"),
        ({"max_bytes": 0, "max_files": -3}, "found max_files=-3, max_bytes=0"),
        ({"sha256": "abc"}, "expected a sha256 of 64 hex digits .* found 'abc'"),
        ({"sha256": "g" * 64}, "expected a sha256 of 64 hex digits"),
    ],
)
def test_values_out_of_range_are_refused_before_any_work(fields, message):
    with pytest.raises(ValueError, match=message):
        DownloadConfig(output="out", **fields)


def test_a_digest_in_either_case_or_none_is_accepted():
    assert DownloadConfig(output="out", sha256="AB" * 32).sha256 == "AB" * 32
    assert DownloadConfig(output="out").sha256 == ""
