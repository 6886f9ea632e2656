"""Metrics on hand-counted scores, and held to scikit-learn's on random ones."""

from __future__ import annotations

import numpy as np
import pytest

from components.evaluation import metrics


def test_metrics_on_hand_counted_scores():
    labels = np.array([0, 0, 0, 1, 1, 1, 1])
    scores = np.array([0.1, 0.6, 0.3, 0.9, 0.8, 0.4, 0.7])
    assert metrics.confusion_matrix(labels, (scores >= 0.5).astype(int)) == [[2, 1], [1, 3]]
    result = metrics.classification_metrics(labels, scores)
    assert result["precision"] == 0.75 and result["recall"] == 0.75
    assert result["accuracy"] == pytest.approx(5 / 7)
    assert result["roc_auc"] == pytest.approx(11 / 12)  # 11 of 12 dog-cat pairs ordered right
    curve = metrics.roc_curve(labels, scores)
    assert curve["fpr"][0] == 0.0 and curve["tpr"][-1] == 1.0


def test_a_split_of_one_class_has_no_area_and_no_curve_and_no_warning():
    labels, scores = np.array([1, 1, 1]), np.array([0.9, 0.2, 0.7])
    result = metrics.classification_metrics(labels, scores)
    assert np.isnan(result["roc_auc"]) and np.isnan(result["cat_accuracy"])
    assert result["dog_accuracy"] == pytest.approx(2 / 3) and result["precision"] == 1.0
    assert metrics.roc_curve(labels, scores) == {"fpr": [], "tpr": [], "thresholds": []}


def test_the_curves_thresholds_are_json_numbers_from_the_strictest_down():
    labels = np.array([0, 0, 1, 1])
    curve = metrics.roc_curve(labels, np.array([0.1, 0.4, 0.35, 0.8]))
    assert curve["thresholds"][0] == 1.0  # scikit-learn's infinity, as JSON can hold it
    assert curve["thresholds"] == sorted(curve["thresholds"], reverse=True)
    assert (curve["fpr"][-1], curve["tpr"][-1]) == (1.0, 1.0)


def test_each_metric_and_the_curve_are_scikit_learns_on_random_scores_with_ties():
    from sklearn import metrics as sk

    rng = np.random.default_rng(0)
    for _ in range(200):
        labels = rng.integers(0, 2, int(rng.integers(1, 60)))
        scores = np.round(rng.random(len(labels)), int(rng.integers(1, 3)))  # ties
        predicted = (scores >= 0.5).astype(np.int64)
        both = len(np.unique(labels)) == 2
        precision, recall, f1, _ = sk.precision_recall_fscore_support(
            labels, predicted, average="binary", zero_division=0.0
        )
        cat, dog = sk.recall_score(
            labels, predicted, labels=[0, 1], average=None, zero_division=np.nan
        )
        expected = {
            "accuracy": sk.accuracy_score(labels, predicted),
            "cat_accuracy": cat,
            "dog_accuracy": dog,
            "precision": precision,
            "recall": recall,
            "f1": f1,
            "roc_auc": sk.roc_auc_score(labels, scores) if both else np.nan,
        }
        assert metrics.classification_metrics(labels, scores) == pytest.approx(
            expected, nan_ok=True
        )
        assert (
            metrics.confusion_matrix(labels, predicted)
            == sk.confusion_matrix(labels, predicted, labels=[0, 1]).tolist()
        )
        if both:
            fpr, tpr, thresholds = sk.roc_curve(labels, scores)
            curve = metrics.roc_curve(labels, scores)
            assert curve["fpr"] == pytest.approx(fpr.tolist())
            assert curve["tpr"] == pytest.approx(tpr.tolist())
            assert curve["thresholds"] == pytest.approx(np.minimum(thresholds, 1.0).tolist())
