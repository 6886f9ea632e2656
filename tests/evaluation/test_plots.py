"""The figures: a confusion matrix of the counts, a grid of the wrong answers, as PNGs."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from components.evaluation import plots


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
    scores = np.array([0.9, 0.6, 0.1, 0.2, 0.45, 0.8, 0.99, 0.7, 0.3, 0.95])
    figure, shown = plots.misclassified_figure(images, labels, scores, ["cat", "dog"])
    # by confidence: image 6 (0.99), 0 (0.9), 3 (0.2), 1 (0.6), 4 (0.45)
    assert shown == [6, 0, 3, 1, 4]
    drawn = [ax for ax in figure.axes if ax.images]
    assert [ax.get_title() for ax in drawn] == [
        "dog p(dog)=0.99",
        "dog p(dog)=0.90",
        "cat p(dog)=0.20",
        "dog p(dog)=0.60",
        "cat p(dog)=0.45",
    ]
    assert [int(ax.images[0].get_array()[0, 0]) for ax in drawn] == [150, 0, 75, 25, 100]
    assert len(figure.axes) == plots.COLUMNS  # one row of eight, three left blank
    assert plots.misclassified_figure(images, labels, scores, ["cat", "dog"], limit=2)[1] == [6, 0]
    png(figure)


def test_a_model_with_no_wrong_answer_still_gets_a_figure():
    figure, shown = plots.misclassified_figure(
        np.zeros((2, 3, 8, 8), np.uint8), np.array([0, 1]), np.array([0.1, 0.9]), ["cat", "dog"]
    )
    assert shown == [] and figure.get_suptitle() == "no misclassified images"
    png(figure)
