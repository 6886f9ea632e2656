"""The PNG reports: a confusion matrix shaded by count, and a grid of the wrong answers."""

from __future__ import annotations

import numpy as np
from PIL import Image

from components.evaluation import plots


def test_the_confusion_matrix_is_darker_where_the_count_is_higher(tmp_path):
    path = tmp_path / "matrix.png"
    plots.confusion_matrix_png([[90, 10], [0, 100]], ["cat", "dog"], path)
    image = Image.open(path).convert("RGB")
    assert image.size == (70 + 2 * plots.CELL, 70 + 2 * plots.CELL)

    def shade(row, col):  # a pixel in the cell's corner, clear of its number
        return image.getpixel((70 + col * plots.CELL + 5, 70 + row * plots.CELL + 5))[0]

    assert shade(1, 1) < shade(0, 0) < shade(0, 1) < shade(1, 0) == 235


def test_the_misclassified_grid_holds_the_wrong_answers_most_confident_first(tmp_path):
    images = np.stack([np.full((1, 8, 8), 25 * i, np.uint8) for i in range(10)])
    labels = np.array([0, 0, 0, 1, 1, 1, 0, 1, 0, 1])
    scores = np.array([0.9, 0.6, 0.1, 0.2, 0.45, 0.8, 0.99, 0.7, 0.3, 0.95])
    path = tmp_path / "wrong.png"
    assert plots.misclassified_png(images, labels, scores, ["cat", "dog"], path) == 5
    sheet = Image.open(path).convert("L")
    assert sheet.size == (8 * plots.TILE, plots.TILE + 16)
    # by confidence: image 6 (0.99), 0 (0.9), 3 (0.2), 1 (0.6), 4 (0.45)
    tiles = [sheet.getpixel((slot * plots.TILE + 40, 40)) for slot in range(6)]
    assert tiles == [150, 0, 75, 25, 100, 255]  # the sixth slot stays blank
    assert plots.misclassified_png(images, labels, scores, ["cat", "dog"], path, limit=2) == 2
