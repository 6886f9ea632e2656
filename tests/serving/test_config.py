"""The serve step's settings: what it refuses before loading anything."""

from __future__ import annotations

import pytest

from components.serving.config import ServeConfig


def test_defaults_listen_like_kserve_and_bound_a_request():
    cfg = ServeConfig(model="m")
    assert (cfg.host, cfg.port) == ("127.0.0.1", 8080)  # a pod passes --host=0.0.0.0
    assert cfg.max_body_bytes == 8 * 1024**2 and cfg.max_connections == 32
    assert cfg.max_inflight_mb == 48


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"port": 0}, "expected a port from 1 to 65535, found 0"),
        ({"max_body_mb": 0}, "expected --max-body-mb above 0"),
        ({"max_body_mb": float("inf")}, "expected --max-body-mb above 0 and at most 1024"),
        ({"max_body_mb": float("nan")}, "expected --max-body-mb above 0 and at most 1024"),
        ({"max_body_mb": 1e12}, "expected --max-body-mb above 0 and at most 1024"),
        ({"max_connections": 10**9}, "from 1 to 10000"),
        ({"max_inflight_mb": 4}, r"expected --max-inflight-mb from --max-body-mb \(8\)"),
        ({"max_inflight_mb": float("nan")}, "expected --max-inflight-mb from --max-body-mb"),
        ({"max_instances": 0}, "expected --max-instances, --max-batch and --max-connections"),
        ({"max_connections": 0}, "expected --max-instances, --max-batch and --max-connections"),
        ({"batch_wait_ms": -1}, "expected --batch-wait-ms from 0 to 1000"),
        ({"forward_passes": -1}, r"expected --forward-passes from 0 \(one a core\) to 256"),
        ({"forward_passes": 10**6}, "expected --forward-passes from 0"),
        ({"header_timeout_seconds": 0}, "expected --header-timeout-seconds, --body-timeout"),
        ({"idle_timeout_seconds": float("nan")}, "expected --header-timeout-seconds"),
        ({"max_header_kb": 0}, "expected --max-header-kb from 1 to 1024"),
        ({"max_headers": 10**6}, "expected --max-header-kb from 1 to 1024 and --max-headers"),
    ],
)
def test_settings_out_of_range_are_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        ServeConfig(model="m", **changes)
