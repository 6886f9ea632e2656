"""Register step: the quality gate between a trained model and the MLflow Model Registry.

python -m components.register --mlflow-run-id RUN --test-accuracy 0.93 [--min-accuracy 0.85]
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass

from components.core import schema
from components.core.logs import setup_logging
from components.core.names import REGISTERED_MODEL_NAME
from components.core.schema import LOCAL, SETTING, setting

log = logging.getLogger(__name__)

GATE_TAG = "quality_gate"


@dataclass(frozen=True)
class RegisterConfig:
    """Which run is judged, against what, and under which registry name."""

    mlflow_run_id: str = setting(help="the training run whose model is judged", role=LOCAL)
    test_accuracy: float = setting(help="its test accuracy, from the evaluate step", role=LOCAL)
    min_accuracy: float = setting(0.85, "lowest test accuracy that is registered", role=SETTING)
    registered_model_name: str = setting(
        REGISTERED_MODEL_NAME, "name in the MLflow Model Registry", role=SETTING
    )
    alias: str = setting("candidate", "alias the registered version gets", role=LOCAL)

    def __post_init__(self) -> None:
        if not (0 <= self.min_accuracy <= 1 and 0 <= self.test_accuracy <= 1):  # NaN fails too
            raise ValueError(
                "expected the minimum and the test accuracy from 0 to 1, found "
                f"{self.min_accuracy} and {self.test_accuracy}"
            )


@dataclass(frozen=True)
class GateDecision:
    """Whether the model was registered, why, and as which version."""

    registered: bool
    reason: str
    version: str | None = None


def register_if_accurate(cfg: RegisterConfig) -> GateDecision:
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
        decision = GateDecision(False, f"not registered: {comparison}")
    else:
        name = cfg.registered_model_name
        version = tracking.register_model(cfg.mlflow_run_id, name, cfg.alias)
        decision = GateDecision(
            True, f"registered {name} version {version} as @{cfg.alias}: {comparison}", version
        )
    tracking.set_run_tags(cfg.mlflow_run_id, {GATE_TAG: decision.reason})
    log.info("quality gate: %s", decision.reason)
    return decision


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.register", description=__doc__.splitlines()[0]
    )
    schema.add_arguments(parser, RegisterConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    cfg = schema.from_namespace(RegisterConfig, build_parser().parse_args(argv))
    setup_logging()
    print(register_if_accurate(cfg).reason)


if __name__ == "__main__":
    main()
