"""Binary classification metrics in NumPy; the positive class is 1 (dog)."""

from __future__ import annotations

import numpy as np


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray) -> list[list[int]]:
    """Rows are the true class, columns the predicted class: [[TN, FP], [FN, TP]]."""
    matrix = np.zeros((2, 2), np.int64)
    np.add.at(matrix, (labels, predicted), 1)
    return matrix.tolist()


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve: the chance a random dog outscores a random cat (ties half)."""
    positives, negatives = scores[labels == 1], scores[labels == 0]
    if len(positives) == 0 or len(negatives) == 0:
        return float("nan")
    _, group, counts = np.unique(
        np.concatenate([positives, negatives]), return_inverse=True, return_counts=True
    )
    last = np.cumsum(counts)
    ranks = ((last - counts + 1 + last) / 2)[group]  # tied scores share their mean rank
    rank_sum = ranks[: len(positives)].sum()
    return float(
        (rank_sum - len(positives) * (len(positives) + 1) / 2) / (len(positives) * len(negatives))
    )


def roc_curve(labels: np.ndarray, scores: np.ndarray, points: int = 101) -> dict[str, list]:
    """False- and true-positive rates at evenly spaced thresholds from 1 down to 0."""
    thresholds = np.linspace(1.0, 0.0, points)
    predicted = scores[None, :] >= thresholds[:, None]
    positives = max(int((labels == 1).sum()), 1)
    negatives = max(int((labels == 0).sum()), 1)
    tpr = (predicted & (labels == 1)).sum(1) / positives
    fpr = (predicted & (labels == 0)).sum(1) / negatives
    return {"fpr": fpr.tolist(), "tpr": tpr.tolist(), "thresholds": thresholds.tolist()}


def classification_metrics(labels: np.ndarray, scores: np.ndarray) -> dict[str, float]:
    """Accuracy, per-class accuracy, precision, recall, F1 and ROC AUC at threshold 0.5."""
    predicted = (scores >= 0.5).astype(np.int64)
    (tn, fp), (fn, tp) = confusion_matrix(labels, predicted)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "accuracy": (tp + tn) / max(len(labels), 1),
        "cat_accuracy": tn / (tn + fp) if tn + fp else float("nan"),
        "dog_accuracy": recall,
        "precision": precision,
        "recall": recall,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "roc_auc": roc_auc(labels, scores),
    }
