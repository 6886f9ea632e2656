"""Metrics on hand-counted scores, and held to scikit-learn's on random ones."""

from __future__ import annotations

import numpy as np
import pytest

from components.evaluation import metrics

PETS = ["cat", "dog"]


def two_class(p_dog):
    p_dog = np.asarray(p_dog, np.float64)
    return np.stack([1 - p_dog, p_dog], 1)


def test_metrics_on_hand_counted_scores():
    labels = np.array([0, 0, 0, 1, 1, 1, 1])
    probabilities = two_class([0.1, 0.6, 0.3, 0.9, 0.8, 0.4, 0.7])
    assert metrics.confusion_matrix(labels, probabilities.argmax(1), 2) == [[2, 1], [1, 3]]
    result = metrics.classification_metrics(labels, probabilities, PETS)
    assert result["dog_precision"] == 0.75 and result["dog_recall"] == 0.75
    assert result["cat_recall"] == pytest.approx(2 / 3)
    assert result["accuracy"] == pytest.approx(5 / 7)
    assert result["macro_f1"] == pytest.approx((2 / 3 + 0.75) / 2)
    assert result["roc_auc"] == pytest.approx(11 / 12)  # 11 of 12 dog-cat pairs ordered right
    curve = metrics.roc_curve(labels, probabilities)
    assert curve["fpr"][0] == 0.0 and curve["tpr"][-1] == 1.0


def test_five_classes_by_name_with_a_confusion_matrix_and_no_curve():
    classes = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]
    labels = np.array([0, 1, 2, 3, 4, 4])
    probabilities = np.eye(5)[[0, 1, 2, 3, 2, 4]]  # one tulip taken for a rose
    result = metrics.classification_metrics(labels, probabilities, classes)
    assert result["tulips_recall"] == 0.5 and result["roses_precision"] == 0.5
    assert result["daisy_f1"] == 1.0 and "roc_auc" not in result
    assert metrics.confusion_matrix(labels, probabilities.argmax(1), 5)[4] == [0, 0, 1, 0, 1]
    assert metrics.roc_curve(labels, probabilities) == {"fpr": [], "tpr": [], "thresholds": []}


def test_class_names_mlflow_refuses_are_keys_all_the_same():
    result = metrics.classification_metrics(np.array([0, 1]), np.eye(2), ["café crème", "a+b"])
    assert {"café crème_f1", "a_b_f1"} <= set(result)


def test_a_split_of_one_class_has_no_area_and_no_curve_and_no_warning():
    labels, probabilities = np.array([1, 1, 1]), two_class([0.9, 0.2, 0.7])
    result = metrics.classification_metrics(labels, probabilities, PETS)
    assert np.isnan(result["roc_auc"]) and np.isnan(result["cat_recall"])
    assert result["dog_recall"] == pytest.approx(2 / 3) and result["dog_precision"] == 1.0
    assert result["macro_f1"] == result["dog_f1"]  # the absent class left out of the mean
    assert metrics.roc_curve(labels, probabilities) == {"fpr": [], "tpr": [], "thresholds": []}


def test_the_curves_thresholds_are_json_numbers_from_the_strictest_down():
    labels = np.array([0, 0, 1, 1])
    curve = metrics.roc_curve(labels, two_class([0.1, 0.4, 0.35, 0.8]))
    assert curve["thresholds"][0] == 1.0  # scikit-learn's infinity, as JSON can hold it
    assert curve["thresholds"] == sorted(curve["thresholds"], reverse=True)
    assert (curve["fpr"][-1], curve["tpr"][-1]) == (1.0, 1.0)


@pytest.mark.parametrize("count", [2, 3, 7])
def test_each_metric_and_the_curve_are_scikit_learns_on_random_scores_with_ties(count):
    from sklearn import metrics as sk

    rng = np.random.default_rng(count)
    classes = [f"c{i}" for i in range(count)]
    for _ in range(100):
        size = int(rng.integers(count, 60))
        labels = np.r_[np.arange(count), rng.integers(0, count, size - count)]  # each class
        probabilities = np.round(rng.dirichlet(np.ones(count), size), int(rng.integers(1, 3)))
        predicted = probabilities.argmax(1)
        precision, recall, f1, _ = sk.precision_recall_fscore_support(
            labels, predicted, labels=range(count), average=None, zero_division=0.0
        )
        expected = {"accuracy": sk.accuracy_score(labels, predicted)}
        expected["macro_f1"] = sk.f1_score(labels, predicted, average="macro", zero_division=0.0)
        for index, name in enumerate(classes):
            expected |= {f"{name}_precision": precision[index], f"{name}_recall": recall[index]}
            expected[f"{name}_f1"] = f1[index]
        if count == 2:
            expected["roc_auc"] = sk.roc_auc_score(labels, probabilities[:, 1])
        assert metrics.classification_metrics(labels, probabilities, classes) == pytest.approx(
            expected
        )
        assert (
            metrics.confusion_matrix(labels, predicted, count)
            == sk.confusion_matrix(labels, predicted, labels=range(count)).tolist()
        )
        if count == 2:
            fpr, tpr, thresholds = sk.roc_curve(labels, probabilities[:, 1])
            curve = metrics.roc_curve(labels, probabilities)
            assert curve["fpr"] == pytest.approx(fpr.tolist())
            assert curve["tpr"] == pytest.approx(tpr.tolist())
            assert curve["thresholds"] == pytest.approx(np.minimum(thresholds, 1.0).tolist())
