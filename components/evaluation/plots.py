"""PNG reports drawn with Pillow: a confusion matrix and a grid of misclassified images."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

CELL = 120
TILE = 96


def confusion_matrix_png(matrix: list[list[int]], classes: list[str], path: Path) -> None:
    """Rows are the true class, columns the predicted one; darker is more."""
    size = len(classes)
    margin = 70
    image = Image.new("RGB", (margin + CELL * size, margin + CELL * size), "white")
    draw = ImageDraw.Draw(image)
    peak = max(max(row) for row in matrix) or 1
    for row, values in enumerate(matrix):
        for col, value in enumerate(values):
            shade = int(235 - 180 * value / peak)
            box = (
                margin + col * CELL,
                margin + row * CELL,
                margin + (col + 1) * CELL - 2,
                margin + (row + 1) * CELL - 2,
            )
            draw.rectangle(box, fill=(shade, shade, 255))
            draw.text((box[0] + CELL // 2 - 12, box[1] + CELL // 2 - 6), str(value), fill="black")
    for index, name in enumerate(classes):
        draw.text((margin + index * CELL + CELL // 2 - 10, margin - 20), name, fill="black")
        draw.text((8, margin + index * CELL + CELL // 2 - 6), name, fill="black")
    draw.text((margin, 8), "predicted", fill="black")
    draw.text((8, margin - 20), "true", fill="black")
    image.save(path)


def misclassified_png(
    images: np.ndarray,
    labels: np.ndarray,
    scores: np.ndarray,
    classes: list[str],
    path: Path,
    limit: int = 32,
) -> int:
    """A grid of up to ``limit`` wrongly classified images, most confident first."""
    wrong = np.flatnonzero((scores >= 0.5).astype(np.int64) != labels)
    wrong = wrong[np.argsort(-np.abs(scores[wrong] - 0.5))][:limit]
    columns = 8
    rows = max(1, -(-len(wrong) // columns))
    sheet = Image.new("RGB", (columns * TILE, rows * (TILE + 16)), "white")
    draw = ImageDraw.Draw(sheet)
    for slot, index in enumerate(wrong):
        pixels = images[index]
        tile = Image.fromarray(pixels[0] if pixels.shape[0] == 1 else pixels.transpose(1, 2, 0))
        x, y = (slot % columns) * TILE, (slot // columns) * (TILE + 16)
        sheet.paste(tile.convert("RGB").resize((TILE, TILE)), (x, y))
        guess = classes[int(scores[index] >= 0.5)]
        draw.text((x + 2, y + TILE + 2), f"{guess} p(dog)={scores[index]:.2f}", fill="red")
    sheet.save(path)
    return len(wrong)
