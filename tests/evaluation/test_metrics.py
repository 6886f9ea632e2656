"""Metrics on hand-counted scores."""

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
