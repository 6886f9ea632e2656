"""The quality gate: a model reaches the MLflow Model Registry only if it is accurate enough."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from components import tracking

log = logging.getLogger(__name__)

ALIAS = "candidate"
GATE_TAG = "quality_gate"


@dataclass(frozen=True)
class GateDecision:
    registered: bool
    reason: str
    version: str | None = None


def register_if_accurate(
    run_id: str, accuracy: float, min_accuracy: float, name: str, alias: str = ALIAS
) -> GateDecision:
    """Register the run's model as ``name@alias`` when ``accuracy >= min_accuracy``.

    Either way the decision and its reason are tagged on the MLflow run and logged.
    """
    comparison = (
        f"test accuracy {accuracy:.4f} {'>=' if accuracy >= min_accuracy else '<'} "
        f"minimum {min_accuracy:.4f}"
    )
    if accuracy < min_accuracy:
        decision = GateDecision(False, f"not registered: {comparison}")
    else:
        version = tracking.register_model(run_id, name, alias)
        decision = GateDecision(
            True, f"registered {name} version {version} as @{alias}: {comparison}", version
        )
    tracking.set_run_tags(run_id, {GATE_TAG: decision.reason})
    log.info("quality gate: %s", decision.reason)
    return decision
