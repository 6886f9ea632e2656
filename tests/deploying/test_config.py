"""The deploy step's settings: a version, DNS names, a canary share, replica bounds."""

from __future__ import annotations

import pytest

from components.deploying.config import DeployConfig

BASE = dict(model_version="3", tracking_uri="http://mlflow:5000", image="img")


def test_the_model_is_named_by_its_version_not_an_alias():
    assert DeployConfig(**BASE).model_uri == "models:/dogs-vs-cats/3"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"model_version": "candidate"}, "expected a registered model version"),
        ({"name": "Dogs_Cats"}, "expected a DNS label as the name"),
        ({"namespace": "-x"}, "expected a DNS label as the namespace"),
        ({"canary_percent": 0}, "expected canary_percent from 1 to 100"),
        ({"min_replicas": 4}, "expected 0 <= min_replicas <= max_replicas"),
    ],
)
def test_values_a_cluster_would_refuse_are_refused_first(changes, message):
    with pytest.raises(ValueError, match=message):
        DeployConfig(**{**BASE, **changes})
