"""The evaluate step's schema."""

from __future__ import annotations

from dataclasses import dataclass

from components.core.names import DEFAULT_EXPERIMENT, SCORING_RUNTIMES
from components.core.schema import LOCAL, PER_RUN, setting
from components.data.arrays import SPLITS


@dataclass(frozen=True)
class EvaluateConfig:
    """Which split is scored, where, and into which MLflow run: the evaluate step's schema."""

    model_dir: str = setting(help="directory written by the train step", role=LOCAL)
    data: str = setting(help="directory written by the preprocess step", role=LOCAL)
    output: str = setting(help="directory for metrics.json, roc.json and the PNGs", role=LOCAL)
    split: str = setting("test", "split to score", choices=SPLITS, role=LOCAL)
    experiment: str = setting(DEFAULT_EXPERIMENT, "MLflow experiment", role=PER_RUN)
    mlflow_run_id: str | None = setting(
        None, "MLflow run to log into (default: the one in MODEL/mlflow_run_id)", role=LOCAL
    )
    source_listing: str | None = setting(
        None,
        "MLflow run of the download step that records the photos' source listing, which the "
        "test split is checked against (default: the one the training run recorded)",
        role=LOCAL,
    )
    device: str = setting("auto", "auto, cpu, cuda or cuda:N", role=LOCAL)
    runtime: str = setting(
        "auto",
        "onnx (ONNX Runtime, the float32 graph), onnx-int8 (the model's int8 graph) or torch; "
        "auto: on a CPU the float32 graph and, where the model has one, the int8 graph too "
        "(its report in int8/; the gate judges both), on a GPU torch",
        choices=SCORING_RUNTIMES,
        role=LOCAL,
    )
