"""The register step's schema: accuracies from 0 to 1, or a refusal."""

from __future__ import annotations

import pytest

from components.registration.config import DEFAULT_ALIAS, RegisterConfig, check_alias

NAN = float("nan")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            {"test_accuracy": 0.9, "min_accuracy": 85},
            r"expected min_accuracy from 0 to 1, found 85 \(a share: 0.85 for 85%\)$",
        ),
        ({"min_accuracy": 93.0}, r"min_accuracy from 0 to 1, found 93 \(a share: 0.93 for 93%\)"),
        ({"test_accuracy": NAN}, "expected test_accuracy from 0 to 1, found nan$"),
        ({"test_accuracy": -0.5}, "expected test_accuracy from 0 to 1, found -0.5$"),
    ],
)
def test_accuracies_outside_0_to_1_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        RegisterConfig(mlflow_run_id="r", **fields)


def test_the_defaults_register_as_candidate_at_0_85():
    cfg = RegisterConfig(mlflow_run_id="r", test_accuracy=0.9)
    assert (cfg.min_accuracy, cfg.alias, cfg.registered_model_name) == (
        0.85,
        "candidate",
        "dogs-vs-cats",
    )


@pytest.mark.parametrize(
    ("alias", "message"),
    [
        ("latest", "'latest' alias name .* is reserved"),
        ("v3", "Version alias name 'v3' is reserved"),
        ("", "cannot be empty"),
        ("my candidate", "Invalid alias name"),
    ],
)
def test_an_alias_the_registry_would_refuse_is_refused_before_anything_is_registered(
    alias, message
):
    with pytest.raises(
        ValueError, match=f"expected an alias the Model Registry takes: .*{message}"
    ):
        RegisterConfig(mlflow_run_id="r", alias=alias)


def test_the_default_alias_passes_the_registrys_own_rules():
    check_alias(DEFAULT_ALIAS)  # the schema skips the check for it: MLflow loads slowly
    assert RegisterConfig(mlflow_run_id="r").alias == DEFAULT_ALIAS
