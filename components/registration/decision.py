"""The register step's work: register a model only when its test accuracy is enough."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from components.registration.config import RegisterConfig

log = logging.getLogger(__name__)

ACCURACY_TOLERANCE = 1e-6  # a given accuracy that differs from the run's by more is refused
DECISION_TAG = "quality_gate"  # the MLflow run tag that holds the decision and its reason


@dataclass(frozen=True)
class Decision:
    """Whether the model was registered, why, and as which version."""

    registered: bool
    reason: str
    version: str | None = None


def register_if_accurate(cfg: RegisterConfig) -> Decision:
    """Register the run's model as ``name@alias`` when its accuracy reaches the minimum.

    Either way the decision and its reason are tagged on the MLflow run and logged.

    Args:
        cfg: the run, the minimum and the registry name; a test accuracy given is only
            checked against the one the run holds.

    Returns:
        The decision, with the registered version when there is one.
    """
    from components.core import tracking  # mlflow loads when the gate runs, not for --help

    tracking.check_server()  # one line at once, not a minute of retries
    accuracy = logged_test_accuracy(cfg)
    passed = accuracy >= cfg.min_accuracy
    comparison = (
        f"test accuracy {accuracy:.4f} {'>=' if passed else '<'} minimum {cfg.min_accuracy:.4f}"
    )
    if not passed:
        decision = Decision(False, f"not registered: {comparison}")
    else:
        name = cfg.registered_model_name
        version = tracking.register_model(cfg.mlflow_run_id, name, cfg.alias)
        decision = Decision(
            True, f"registered {name} version {version} as @{cfg.alias}: {comparison}", version
        )
    tracking.set_run_tags(cfg.mlflow_run_id, {DECISION_TAG: decision.reason})
    log.info("quality gate: %s", decision.reason)
    return decision


def logged_test_accuracy(cfg: RegisterConfig) -> float:
    """The ``test_accuracy`` the evaluate step logged into the run: what is judged.

    Raises:
        LookupError: the run has none (it was not evaluated).
        ValueError: ``cfg.test_accuracy`` is given and is not the run's.
    """
    from components.core import tracking

    logged = tracking.run_metrics(cfg.mlflow_run_id).get("test_accuracy")
    if logged is None:
        raise LookupError(
            f"expected a test_accuracy metric in MLflow run {cfg.mlflow_run_id} (the evaluate "
            "step logs it), found none: evaluate the model first"
        )
    if cfg.test_accuracy is not None and abs(cfg.test_accuracy - logged) > ACCURACY_TOLERANCE:
        raise ValueError(
            f"refusing to judge MLflow run {cfg.mlflow_run_id} by a test accuracy of "
            f"{cfg.test_accuracy}: the run's own, from the evaluate step, is {logged}"
        )
    return logged
