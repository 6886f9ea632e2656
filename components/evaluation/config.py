"""The evaluate step's schema."""

from __future__ import annotations

from dataclasses import dataclass

from components.core.names import DEFAULT_EXPERIMENT
from components.core.schema import LOCAL, SETTING, setting
from components.data.arrays import SPLITS


@dataclass(frozen=True)
class EvaluateConfig:
    """Which split is scored, where, and into which MLflow run: the evaluate step's schema."""

    split: str = setting("test", "split to score", choices=SPLITS, role=LOCAL)
    experiment: str = setting(DEFAULT_EXPERIMENT, "MLflow experiment", role=SETTING)
    mlflow_run_id: str | None = setting(
        None, "MLflow run to log into (default: the one in MODEL/mlflow_run_id)", role=LOCAL
    )
    device: str = setting("auto", "auto, cpu, cuda or cuda:N", role=LOCAL)
