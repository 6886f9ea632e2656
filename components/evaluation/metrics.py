"""Classification metrics in NumPy, as scikit-learn defines them: per class, their macro
mean, and for two classes the ROC curve of the second (dog) against the first.
(Importing scikit-learn loads SciPy: seconds of each evaluation's start.
tests/evaluation/test_metrics.py holds these to scikit-learn's answers.)"""

from __future__ import annotations

from typing import Any

import numpy as np

from components.data.classes import metric_keys


def confusion_matrix(labels: np.ndarray, predicted: np.ndarray, classes: int) -> list[list[int]]:
    """A row a true class, a column a predicted class: for two, [[TN, FP], [FN, TP]]."""
    matrix = np.zeros((classes, classes), dtype=np.int64)
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


def roc_curve(labels: np.ndarray, probabilities: np.ndarray) -> dict[str, list[Any]]:
    """For two classes, false- and true-positive rates of the second class's probability at
    each threshold that changes them, from the strictest down (the first threshold, above
    every score, is written as 1.0); for more, or a split of one class, no points."""
    if probabilities.shape[1] != 2 or not _both_classes(labels):
        return {"fpr": [], "tpr": [], "thresholds": []}
    fpr, tpr, thresholds = _curve(labels, probabilities[:, 1])
    return {
        "fpr": fpr.tolist(),
        "tpr": tpr.tolist(),
        "thresholds": np.minimum(thresholds, 1.0).tolist(),  # JSON has no infinity
    }


def classification_metrics(
    labels: np.ndarray, probabilities: np.ndarray, classes: list[str]
) -> dict[str, float]:
    """Accuracy; each class's precision, recall and F1 (``cat_recall``: its name as an
    MLflow key takes it); their macro mean ``macro_f1``; for two classes the ROC AUC of the
    second's probability. A prediction is the most probable class.

    A class absent from ``labels`` has no recall (NaN) and no F1 (NaN, left out of the
    macro mean); a class never predicted has precision 0.
    """
    predicted = probabilities.argmax(1)
    matrix = np.array(confusion_matrix(labels, predicted, len(classes)), np.float64)
    hits, truths, guesses = np.diag(matrix), matrix.sum(1), matrix.sum(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(guesses > 0, hits / guesses, 0.0)
        recall = np.where(truths > 0, hits / truths, np.nan)
        f1 = np.where(truths > 0, 2 * hits / (truths + guesses), np.nan)
    result = {"accuracy": float(hits.sum() / len(labels)) if len(labels) else 0.0}
    result["macro_f1"] = float(np.nanmean(f1)) if np.isfinite(f1).any() else np.nan
    for index, key in enumerate(metric_keys(classes)):
        result[f"{key}_precision"] = float(precision[index])
        result[f"{key}_recall"] = float(recall[index])
        result[f"{key}_f1"] = float(f1[index])
    if len(classes) == 2:
        both = _both_classes(labels)
        roc_auc = np.nan
        if both:
            fpr, tpr, _ = _curve(labels, probabilities[:, 1])
            roc_auc = float(np.trapezoid(tpr, fpr))
        result["roc_auc"] = roc_auc
    return result
