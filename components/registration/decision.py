"""The register step's work: register a model only when its test accuracy is enough."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from components.registration.config import RegisterConfig

log = logging.getLogger(__name__)

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
        cfg: the run, its test accuracy, the minimum and the registry name.

    Returns:
        The decision, with the registered version when there is one.
    """
    from components.core import tracking  # mlflow loads when the gate runs, not for --help

    passed = cfg.test_accuracy >= cfg.min_accuracy
    comparison = (
        f"test accuracy {cfg.test_accuracy:.4f} {'>=' if passed else '<'} "
        f"minimum {cfg.min_accuracy:.4f}"
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
