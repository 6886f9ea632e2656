"""The register step's work: register a model only when its test accuracy is enough,
and move the alias to it only when it beats the alias's holder."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from components.registration.card import model_card
from components.registration.challenge import Holder, challenge
from components.registration.config import RegisterConfig

log = logging.getLogger(__name__)

ACCURACY_TOLERANCE = 1e-6  # a given accuracy that differs from the run's by more is refused
DECISION_TAG = "quality_gate"  # the MLflow run tag that holds the decision and its reason
EVALUATION = "evaluation/test/metrics.json"  # the evaluate step's report on the test split


@dataclass(frozen=True)
class Decision:
    """Whether the model was registered, whether it took the alias, why, and as which
    version."""

    registered: bool
    reason: str
    version: str | None = None
    took_alias: bool = False


def register_if_accurate(cfg: RegisterConfig) -> Decision:
    """Register the run's model when its accuracy reaches the minimum, and point the
    alias at it when it also beats the alias's holder on the same test split.

    Either way the decision and its reason are tagged on the MLflow run and logged.

    Args:
        cfg: the run, the minimum, the registry name and alias; a test accuracy given
            is only checked against the one the run holds.

    Returns:
        The decision, with the registered version when there is one.
    """
    from components.core import tracking  # mlflow loads when the gate runs, not for --help

    tracking.check_server()  # one line at once, not a minute of retries
    report = evaluation_report(cfg)
    accuracy = float(report["metrics"]["accuracy"])
    passed = accuracy >= cfg.min_accuracy
    comparison = (
        f"test accuracy {accuracy:.4f} {'>=' if passed else '<'} minimum {cfg.min_accuracy:.4f}"
    )
    if passed:
        decision = _register(cfg, report, accuracy, comparison)
    else:
        decision = Decision(False, f"not registered: {comparison}")
    tracking.set_run_tags(cfg.mlflow_run_id, {DECISION_TAG: decision.reason})
    log.info("quality gate: %s", decision.reason)
    return decision


def _register(
    cfg: RegisterConfig, report: dict[str, Any], accuracy: float, comparison: str
) -> Decision:
    """Register the run's model with its card; the alias only as the challenge allows."""
    from components.core import tracking

    name, run, alias = cfg.registered_model_name, cfg.mlflow_run_id, cfg.alias
    digests = tracking.input_digests(run)
    held = tracking.alias_holder(name, alias)
    holder = Holder(*held) if held else None
    verdict = challenge(holder, accuracy, digests.get("test-split"), alias, cfg.force_alias)
    description, tags = model_card(run, report, tracking.run_params(run), digests)
    description += f" Compared for @{alias}: {verdict.reason}."
    version = tracking.register_model(
        run, name, alias if verdict.takes_alias else None, description, tags | verdict.record
    )
    where = f"as @{alias}" if verdict.takes_alias else f"without @{alias}"
    return Decision(
        True,
        f"registered {name} version {version} {where}: {comparison}; {verdict.reason}",
        version,
        verdict.takes_alias,
    )


def evaluation_report(cfg: RegisterConfig) -> dict[str, Any]:
    """The evaluation the evaluate step recorded in the run, once it is known to have
    scored the very model the run logged: its test accuracy is what is judged.

    Not the run's ``test_accuracy`` metric: anyone may log another value under that name
    later, into any run. The evaluate step's report (``evaluation/test/metrics.json``)
    names the weights it scored (their sha256), and the run's logged model records its own.

    Raises:
        LookupError: the run holds no evaluation on the test split (it was not evaluated).
        ValueError: the evaluation scored other weights than the run's model, or
            ``cfg.test_accuracy`` is given and is not the evaluation's.
    """
    from components.core import tracking

    run = cfg.mlflow_run_id
    report = tracking.load_run_json(run, EVALUATION)
    if report is None:
        raise LookupError(
            f"expected the evaluate step's report {EVALUATION} in MLflow run {run}, found "
            "none: evaluate the model first"
        )
    _, weights = tracking.logged_model_weights(run)
    accuracy = report.get("metrics", {}).get("accuracy") if isinstance(report, dict) else None
    if not weights or report.get("weights_sha256") != weights or not _is_accuracy(accuracy):
        raise ValueError(
            f"refusing to judge MLflow run {run}: its recorded evaluation did not score the "
            f"model the run logged (weights {str(report.get('weights_sha256'))[:12]}… "
            f"evaluated, {str(weights)[:12]}… logged); evaluate the run's own model"
        )
    if cfg.test_accuracy is not None and abs(cfg.test_accuracy - accuracy) > ACCURACY_TOLERANCE:
        raise ValueError(
            f"refusing to judge MLflow run {run} by a test accuracy of {cfg.test_accuracy}: "
            f"the run's own, from the evaluate step, is {accuracy}"
        )
    return report


def _is_accuracy(value: object) -> bool:
    return isinstance(value, int | float) and 0 <= value <= 1
