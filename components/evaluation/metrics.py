"""Binary classification metrics by scikit-learn; the positive class is 1 (dog)."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn import metrics as sk

CLASS_LABELS = [0, 1]  # cat, dog: every matrix and score has both, present or not


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray) -> list[list[int]]:
    """Rows are the true class, columns the predicted class: [[TN, FP], [FN, TP]]."""
    matrix: list[list[int]] = sk.confusion_matrix(labels, predicted, labels=CLASS_LABELS).tolist()
    return matrix


def _both_classes(labels: np.ndarray) -> bool:
    """Whether both classes occur: a ROC curve and its area need both."""
    return len(np.unique(labels)) == 2


def roc_curve(labels: np.ndarray, scores: np.ndarray) -> dict[str, list[Any]]:
    """False- and true-positive rates at each threshold that changes them, from the
    strictest down (the first threshold, above every score, is written as 1.0)."""
    if not _both_classes(labels):
        return {"fpr": [], "tpr": [], "thresholds": []}
    fpr, tpr, thresholds = sk.roc_curve(labels, scores)
    return {
        "fpr": fpr.tolist(),
        "tpr": tpr.tolist(),
        "thresholds": np.minimum(thresholds, 1.0).tolist(),  # JSON has no infinity
    }


def classification_metrics(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Accuracy, per-class accuracy, precision, recall, F1 and ROC AUC at threshold 0.5.

    A class absent from ``labels`` has no accuracy (NaN); an empty precision or recall is 0.
    """
    predicted = (scores >= 0.5).astype(np.int64)
    precision, recall, f1, _ = sk.precision_recall_fscore_support(
        labels, predicted, average="binary", zero_division=0.0
    )
    cat_accuracy, dog_accuracy = sk.recall_score(
        labels, predicted, labels=CLASS_LABELS, average=None, zero_division=np.nan
    )
    return {
        "accuracy": float(sk.accuracy_score(labels, predicted)) if len(labels) else 0.0,
        "cat_accuracy": float(cat_accuracy),
        "dog_accuracy": float(dog_accuracy),
        "precision": float(precision),
        "recall": float(recall),
        "f1": float(f1),
        "roc_auc": float(sk.roc_auc_score(labels, scores)) if _both_classes(labels) else np.nan,
    }
