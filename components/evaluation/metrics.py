"""Binary classification metrics in NumPy, as scikit-learn defines them; the positive class
is 1 (dog). (Importing scikit-learn loads SciPy: seconds of each evaluation's start.
tests/evaluation/test_metrics.py holds these to scikit-learn's answers.)"""

from __future__ import annotations

from typing import Any

import numpy as np


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray) -> list[list[int]]:
    """Rows are the true class, columns the predicted class: [[TN, FP], [FN, TP]]."""
    matrix = np.zeros((2, 2), dtype=np.int64)
    np.add.at(matrix, (np.asarray(labels, np.int64), np.asarray(predicted, np.int64)), 1)
    counts: list[list[int]] = matrix.tolist()
    return counts


def _both_classes(labels: np.ndarray) -> bool:
    """Whether both classes occur: a ROC curve and its area need both."""
    return len(np.unique(labels)) == 2


def _curve(labels: np.ndarray, scores: np.ndarray) -> tuple[np.ndarray, ...]:
    """False- and true-positive rates and thresholds, from the strictest down: one point a
    distinct score, less those on a straight line between their neighbours, after a first
    point above every score (threshold infinity); scikit-learn's ``roc_curve``."""
    order = np.argsort(scores, kind="mergesort")[::-1]
    scores, labels = np.asarray(scores)[order], np.asarray(labels)[order]
    ends = np.r_[np.flatnonzero(np.diff(scores)), labels.size - 1]  # last of each score
    true_positives = np.cumsum(labels)[ends]
    false_positives = 1 + ends - true_positives
    thresholds = scores[ends]
    if len(ends) > 2:
        bends = np.diff(false_positives, 2).astype(bool) | np.diff(true_positives, 2).astype(bool)
        kept = np.flatnonzero(np.r_[True, bends, True])
        false_positives, true_positives = false_positives[kept], true_positives[kept]
        thresholds = thresholds[kept]
    false_positives, true_positives = np.r_[0, false_positives], np.r_[0, true_positives]
    fpr = false_positives / false_positives[-1]
    tpr = true_positives / true_positives[-1]
    return fpr, tpr, np.r_[np.inf, thresholds]


def roc_curve(labels: np.ndarray, scores: np.ndarray) -> dict[str, list[Any]]:
    """False- and true-positive rates at each threshold that changes them, from the
    strictest down (the first threshold, above every score, is written as 1.0)."""
    if not _both_classes(labels):
        return {"fpr": [], "tpr": [], "thresholds": []}
    fpr, tpr, thresholds = _curve(labels, scores)
    return {
        "fpr": fpr.tolist(),
        "tpr": tpr.tolist(),
        "thresholds": np.minimum(thresholds, 1.0).tolist(),  # JSON has no infinity
    }


def _ratio(part: int, whole: int, empty: float) -> float:
    return part / whole if whole else empty


def classification_metrics(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Accuracy, per-class accuracy, precision, recall, F1 and ROC AUC at threshold 0.5.

    A class absent from ``labels`` has no accuracy (NaN); an empty precision or recall is 0.
    """
    predicted = (scores >= 0.5).astype(np.int64)
    (true_negatives, false_positives), (false_negatives, true_positives) = confusion_matrix(
        labels, predicted
    )
    roc_auc = np.nan
    if _both_classes(labels):
        fpr, tpr, _ = _curve(labels, scores)
        roc_auc = float(np.trapezoid(tpr, fpr))
    errors = false_positives + false_negatives
    return {
        "accuracy": _ratio(true_negatives + true_positives, len(labels), 0.0),
        "cat_accuracy": _ratio(true_negatives, true_negatives + false_positives, np.nan),
        "dog_accuracy": _ratio(true_positives, true_positives + false_negatives, np.nan),
        "precision": _ratio(true_positives, true_positives + false_positives, 0.0),
        "recall": _ratio(true_positives, true_positives + false_negatives, 0.0),
        "f1": _ratio(2 * true_positives, 2 * true_positives + errors, 0.0),
        "roc_auc": roc_auc,
    }
