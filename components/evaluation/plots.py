"""The evaluation's figures, drawn with matplotlib: a confusion matrix (laid out as
scikit-learn's display), and a grid of the misclassified images, most confident first.

Each is a ``matplotlib.figure.Figure`` of its own (no pyplot state), saved as a PNG into
the step's output, and that file logged to MLflow.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from matplotlib.figure import Figure

COLUMNS = 8  # of the misclassified grid


def confusion_matrix_figure(matrix: list[list[int]], classes: list[str]) -> Figure:
    """Rows are the true class, columns the predicted one; darker is more. Beyond a dozen
    classes the counts are left to the colours, and the names turn."""
    side = min(4 + 0.3 * len(classes), 30)
    figure = Figure(figsize=(side, side), layout="constrained")
    ax = figure.add_subplot()
    counts = np.array(matrix)
    shown = ax.imshow(counts, cmap="Blues", interpolation="nearest")
    middle = (counts.max() + counts.min()) / 2
    for (row, column), count in np.ndenumerate(counts if len(classes) <= 12 else []):
        light = shown.cmap(shown.norm(counts.max() if count < middle else counts.min()))
        ax.text(column, row, str(count), ha="center", va="center", color=light)
    ax.set(xticks=range(len(classes)), yticks=range(len(classes)))
    ax.set_xticklabels(classes, rotation=0 if len(classes) <= 5 else 90)
    ax.set_yticklabels(classes)
    ax.set(xlabel="Predicted label", ylabel="True label")
    return figure


class Photos(Protocol):
    """Photos by position: an array of them, or a split read from disk one at a time."""

    def __getitem__(self, index: int) -> np.ndarray: ...


def misclassified_figure(
    images: Photos,
    labels: np.ndarray,
    probabilities: np.ndarray,
    classes: list[str],
    limit: int = 32,
) -> tuple[Figure, list[int]]:
    """A grid of up to ``limit`` wrongly classified images, most confident first, each
    titled with the guess, its probability and the true class; with the indices shown,
    in order."""
    guesses, confidence = probabilities.argmax(1), probabilities.max(1)
    wrong = np.flatnonzero(guesses != labels)
    wrong = wrong[np.argsort(-confidence[wrong], kind="stable")][:limit]
    rows = max(1, -(-len(wrong) // COLUMNS))
    height = rows * 1.7
    figure = Figure(figsize=(COLUMNS * 1.4, height))
    axes = figure.subplots(rows, COLUMNS, squeeze=False).ravel()
    # fixed margins, room for each title: a constrained layout of 32 axes takes seconds to save
    figure.subplots_adjust(
        left=0.01, right=0.99, bottom=0.01, top=1 - 0.22 / height, wspace=0.08, hspace=0.3
    )
    for ax in axes:
        ax.set_axis_off()
    for ax, index in zip(axes, wrong, strict=False):
        pixels = images[int(index)]
        grey = pixels.shape[0] == 1
        ax.imshow(pixels[0] if grey else pixels.transpose(1, 2, 0), cmap="gray" if grey else None)
        guess, truth = classes[guesses[index]][:14], classes[labels[index]][:14]
        # y given: no layout pass to place each title above decorations an axis-off has none of
        title = f"{guess} {confidence[index]:.2f}\n(is {truth})"
        ax.set_title(title, fontsize=6, color="red", y=1.0)
    if not len(wrong):
        figure.suptitle("no misclassified images")
    return figure, [int(i) for i in wrong]
