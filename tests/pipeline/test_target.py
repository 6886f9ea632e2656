"""What a spec is compiled for: the oldest backend it must run on, nodes, the GPUs asked for."""

from __future__ import annotations

import pytest

from pipeline.target import ClusterTarget, PipelineOnly, backend_version


def test_backend_versions_read_as_major_minor_and_older_ones_are_refused():
    assert backend_version("2.5") == (2, 5) and backend_version("2.15.1") == (2, 15)
    with pytest.raises(
        ValueError, match="expected a KFP backend version such as 2.5, found '99.x'"
    ):
        backend_version("99.x")
    with pytest.raises(ValueError, match="KFP backend 1.8 is older than the oldest supported"):
        backend_version("1.8")


def test_secrets_are_optional_only_where_the_backend_knows_the_field():
    assert ClusterTarget(kfp_backend="2.15").optional_secrets
    assert not ClusterTarget(kfp_backend="2.14").optional_secrets


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ClusterTarget(nodes=0), "expected 1 to 2147483647 training nodes, found 0"),
        (lambda: ClusterTarget(kfp_backend="2.4"), "older than the oldest supported, 2.5"),
        (lambda: PipelineOnly(gpus=0), "expected 1 or more GPUs for the train task, found 0"),
    ],
)
def test_a_target_that_cannot_run_is_refused(build, message):
    with pytest.raises(ValueError, match=message):
        build()
