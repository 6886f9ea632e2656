"""The figures: a confusion matrix of the counts, a grid of the wrong answers, as PNGs."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from components.evaluation import plots

PETS = ["cat", "dog"]


def png(figure) -> Image.Image:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return Image.open(io.BytesIO(buffer.getvalue()))


def test_the_confusion_matrix_shows_each_count_in_its_cell_darker_where_higher():
    figure = plots.confusion_matrix_figure([[90, 10], [0, 100]], ["cat", "dog"])
    (ax,) = figure.axes
    cells = {t.get_position(): t.get_text() for t in ax.texts}
    # scikit-learn's display: column = predicted (x), row = true (y)
    assert cells == {(0, 0): "90", (1, 0): "10", (0, 1): "0", (1, 1): "100"}
    assert [t.get_text() for t in ax.get_xticklabels()] == ["cat", "dog"]
    assert ax.get_xlabel() == "Predicted label" and ax.get_ylabel() == "True label"
    shades = ax.images[0].to_rgba(np.array([[0, 100]]))[0]
    assert shades[1][:3].sum() < shades[0][:3].sum()  # more is darker
    assert png(figure).size[0] > 100


def test_the_misclassified_grid_holds_the_wrong_answers_most_confident_first():
    images = np.stack([np.full((1, 8, 8), 25 * i, np.uint8) for i in range(10)])
    labels = np.array([0, 0, 0, 1, 1, 1, 0, 1, 0, 1])
    p_dog = np.array([0.9, 0.6, 0.1, 0.2, 0.45, 0.8, 0.99, 0.7, 0.3, 0.95])
    probabilities = np.stack([1 - p_dog, p_dog], 1)
    figure, shown = plots.misclassified_figure(images, labels, probabilities, ["cat", "dog"])
    # by confidence: image 6 (dog 0.99), 0 (dog 0.9), 3 (cat 0.8), 1 (dog 0.6), 4 (cat 0.55)
    assert shown == [6, 0, 3, 1, 4]
    drawn = [ax for ax in figure.axes if ax.images]
    assert [ax.get_title() for ax in drawn] == [
        "dog 0.99\n(is cat)",
        "dog 0.90\n(is cat)",
        "cat 0.80\n(is dog)",
        "dog 0.60\n(is cat)",
        "cat 0.55\n(is dog)",
    ]
    assert [int(ax.images[0].get_array()[0, 0]) for ax in drawn] == [150, 0, 75, 25, 100]
    assert len(figure.axes) == plots.COLUMNS  # one row of eight, three left blank
    assert plots.misclassified_figure(images, labels, probabilities, PETS, limit=2)[1] == [6, 0]
    png(figure)


def test_a_model_with_no_wrong_answer_still_gets_a_figure():
    figure, shown = plots.misclassified_figure(
        np.zeros((2, 3, 8, 8), np.uint8), np.array([0, 1]), np.eye(2), ["cat", "dog"]
    )
    assert shown == [] and figure.get_suptitle() == "no misclassified images"
    png(figure)


def test_a_hundred_classes_get_a_matrix_named_by_class_without_a_number_in_each_cell():
    classes = [f"class {i}" for i in range(100)]
    figure = plots.confusion_matrix_figure(np.eye(100, dtype=int).tolist(), classes)
    (ax,) = figure.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == classes and not ax.texts
    assert png(figure).size[0] >= 2000
