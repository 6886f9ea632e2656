"""What the KFP UI draws from an evaluation: metrics, the confusion matrix, ROC, a report."""

from __future__ import annotations

import json

from kfp.dsl import ClassificationMetrics, Markdown, Metrics

from components.tasks.reports import markdown_report, publish_evaluation

RESULT = {
    "count": 20,
    "classes": ["cat", "dog"],
    "metrics": {"accuracy": 0.85, "roc_auc": 0.9},
    "confusion_matrix": [[9, 1], [2, 8]],
}


def test_the_evaluation_fills_the_kfp_artifacts(tmp_path):
    (tmp_path / "roc.json").write_text(
        json.dumps({"fpr": [0.0, 1.0], "tpr": [0.0, 1.0], "thresholds": [1.0, 0.0]})
    )
    metrics = Metrics(name="metrics", uri=str(tmp_path / "m"), metadata={})
    classification = ClassificationMetrics(name="c", uri=str(tmp_path / "c"), metadata={})
    report = Markdown(name="report", uri=str(tmp_path / "report.md"), metadata={})
    publish_evaluation(RESULT, str(tmp_path), "run-7", metrics, classification, report)
    assert metrics.metadata == {"accuracy": 0.85, "roc_auc": 0.9, "mlflow_run_id": "run-7"}
    matrix = classification.metadata["confusionMatrix"]
    assert [row["row"] for row in matrix["rows"]] == [[9, 1], [2, 8]]
    assert len(classification.metadata["confidenceMetrics"]) == 2
    assert (tmp_path / "report.md").read_text() == markdown_report(RESULT, "run-7")


def test_the_report_names_the_run_and_counts_each_cell():
    text = markdown_report(RESULT, "run-7")
    assert "Test split: 20 photos of 2 classes" in text and "`run-7`" in text
    assert "| accuracy | 0.8500 |" in text
    assert "| cat | 9 | 1 |" in text and "| dog | 2 | 8 |" in text


def test_the_int8_graphs_figures_sit_beside_the_float_ones(tmp_path):
    (tmp_path / "roc.json").write_text(
        json.dumps({"fpr": [0.0, 1.0], "tpr": [0.0, 1.0], "thresholds": [1.0, 0.0]})
    )
    (tmp_path / "int8").mkdir()
    (tmp_path / "int8" / "metrics.json").write_text(json.dumps({"metrics": {"accuracy": 0.84}}))
    metrics = Metrics(name="metrics", uri=str(tmp_path / "m"), metadata={})
    classification = ClassificationMetrics(name="c", uri=str(tmp_path / "c"), metadata={})
    report = Markdown(name="report", uri=str(tmp_path / "report.md"), metadata={})
    publish_evaluation(RESULT, str(tmp_path), "run-7", metrics, classification, report)
    assert metrics.metadata["accuracy"] == 0.85
    assert metrics.metadata["int8_accuracy"] == 0.84


def test_three_classes_draw_their_matrix_and_no_roc_curve_with_names_escaped(tmp_path):
    (tmp_path / "roc.json").write_text(json.dumps({"fpr": [], "tpr": [], "thresholds": []}))
    result = {
        "count": 6,
        "classes": ["daisy", "rose|red", "*tulip*"],
        "metrics": {"accuracy": 0.5},
        "confusion_matrix": [[2, 0, 0], [1, 1, 0], [0, 2, 0]],
    }
    classification = ClassificationMetrics(name="c", uri=str(tmp_path / "c"), metadata={})
    report = Markdown(name="report", uri=str(tmp_path / "report.md"), metadata={})
    metrics = Metrics(name="metrics", uri=str(tmp_path / "m"), metadata={})
    publish_evaluation(result, str(tmp_path), "run-7", metrics, classification, report)
    matrix = classification.metadata["confusionMatrix"]
    assert [row["row"] for row in matrix["rows"]] == result["confusion_matrix"]
    assert "confidenceMetrics" not in classification.metadata
    text = (tmp_path / "report.md").read_text()
    assert "| true / predicted | daisy | rose\\|red | \\*tulip\\* |" in text
    assert "| \\*tulip\\* | 0 | 2 | 0 |" in text
