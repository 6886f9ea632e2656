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
    """Fill the KFP ``Metrics``, ``ClassificationMetrics`` and ``Markdown`` output artifacts."""
    for name, value in result["metrics"].items():
        metrics.log_metric(name, value)
    metrics.metadata["mlflow_run_id"] = mlflow_run_id
    classification.log_confusion_matrix(result["classes"], result["confusion_matrix"])
    roc = json.loads((Path(evaluation_dir) / "roc.json").read_text())
    classification.log_roc_curve(roc["fpr"], roc["tpr"], roc["thresholds"])
    Path(report.path).write_text(markdown_report(result, mlflow_run_id))


def markdown_report(result: dict[str, Any], mlflow_run_id: str) -> str:
    rows = "\n".join(f"| {name} | {value:.4f} |" for name, value in result["metrics"].items())
    (tn, fp), (fn, tp) = result["confusion_matrix"]
    return (
        f"# Dogs vs Cats: test split ({result['count']} images)\n\n"
        f"MLflow run: `{mlflow_run_id}`\n\n"
        f"| metric | value |\n| --- | --- |\n{rows}\n\n"
        f"| true / predicted | cat | dog |\n| --- | --- | --- |\n"
        f"| cat | {tn} | {fp} |\n| dog | {fn} | {tp} |\n"
    )
