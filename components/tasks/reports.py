"""Turn an evaluation into what the KFP UI draws: metrics, a confusion matrix, a ROC curve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def publish_evaluation(
    result: dict[str, Any],
    evaluation_dir: str,
    mlflow_run_id: str,
    metrics: Any,
    classification: Any,
    report: Any,
) -> None:
    """Fill the KFP ``Metrics``, ``ClassificationMetrics`` and ``Markdown`` output artifacts;
    where the model's int8 graph was scored too (``int8/metrics.json``), its figures as
    ``int8_*`` metrics beside the float32 graph's."""
    for name, value in result["metrics"].items():
        metrics.log_metric(name, value)
    int8_report = Path(evaluation_dir) / "int8" / "metrics.json"
    if int8_report.is_file():
        for name, value in json.loads(int8_report.read_text())["metrics"].items():
            metrics.log_metric(f"int8_{name}", value)
    metrics.metadata["mlflow_run_id"] = mlflow_run_id
    classification.log_confusion_matrix(result["classes"], result["confusion_matrix"])
    roc = json.loads((Path(evaluation_dir) / "roc.json").read_text())
    if roc["fpr"]:  # two classes: more have no one ROC curve
        classification.log_roc_curve(roc["fpr"], roc["tpr"], roc["thresholds"])
    Path(report.path).write_text(markdown_report(result, mlflow_run_id))


def markdown_report(result: dict[str, Any], mlflow_run_id: str) -> str:
    """The metrics and the confusion matrix as Markdown tables, class names escaped."""
    rows = "\n".join(f"| {name} | {value:.4f} |" for name, value in result["metrics"].items())
    classes = [_cell(name) for name in result["classes"]]
    matrix = "\n".join(
        f"| {name} | " + " | ".join(map(str, counts)) + " |"
        for name, counts in zip(classes, result["confusion_matrix"], strict=True)
    )
    return (
        f"# Test split: {result['count']} photos of {len(classes)} classes\n\n"
        f"MLflow run: `{mlflow_run_id}`\n\n"
        f"| metric | value |\n| --- | --- |\n{rows}\n\n"
        f"| true / predicted | {' | '.join(classes)} |\n|{' --- |' * (len(classes) + 1)}\n"
        f"{matrix}\n"
    )


def _cell(text: str) -> str:
    """``text`` inside a Markdown table cell: its pipes and markup escaped."""
    return "".join(f"\\{c}" if c in "\\|*_`[]<>#" else c for c in text)
