"""Classifying image files with a model from a train output or an MLflow model URI.

The logic behind ``python -m components.predict``; it imports ONNX Runtime, torch where
torch scores or reads a model.pt, and mlflow for a URI, which the command line loads only
once its arguments are parsed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from components.data.images import IMAGE_SUFFIXES, decode_file
from components.scoring.loading import LoadedModel, load_scorer
from components.scoring.scorers import CPU_BATCH, class_probabilities


@dataclass
class Predictions:
    """(file, class name, probability of that class) for each file that decodes, in
    order, and (file, why) for each that does not."""

    classified: list[tuple[Path, str, float]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def predict_files(model: str, paths: list[Path], runtime: str = "auto") -> Predictions:
    """Classify image files, and the photos in folders, each decoded as the preprocess
    step decodes it, a batch at a time.

    A folder stands for its photos (by suffix: .jpg, .png, …), in its subfolders too, by
    name. A file that is missing, empty, oversized or not a complete image is skipped
    with its reason, as the preprocess step skips it; the others are classified.

    Args:
        model: a train output directory or an MLflow model URI.
        paths: the images, or folders of them.
        runtime: onnx, onnx-int8, torch or auto (``load_scorer``: the int8 graph where
            the model has one and this CPU multiplies int8 exactly, else the float32 one).
    """
    loaded = load_scorer(model, runtime)
    result, batch = Predictions(), []
    for file in photo_files(paths):
        if not file.is_file():
            result.skipped.append((file, "not a file" if file.exists() else "no such file"))
            continue
        outcome = decode_file(file, loaded.image_size, loaded.channels)
        if outcome.pixels is None:
            result.skipped.append((file, str(outcome.reason)))
            continue
        batch.append((file, outcome.pixels))
        if len(batch) == CPU_BATCH:
            result.classified += _classified(loaded, batch)
            batch = []
    result.classified += _classified(loaded, batch)
    return result


def photo_files(paths: list[Path]) -> Iterator[Path]:
    """Each path, a folder replaced by the photo files under it, sorted by name (hidden
    ones left out)."""
    for path in map(Path, paths):
        if not path.is_dir():
            yield path
            continue
        yield from sorted(
            file
            for file in path.rglob("*")
            if file.suffix.lower() in IMAGE_SUFFIXES
            and not any(part.startswith(".") for part in file.relative_to(path).parts)
        )


def _classified(
    loaded: LoadedModel, batch: list[tuple[Path, np.ndarray]]
) -> list[tuple[Path, str, float]]:
    if not batch:
        return []
    logits = loaded.scorer(np.stack([pixels for _, pixels in batch]).astype(np.float32))
    return [
        (file, loaded.classes[int(p.argmax())], float(p.max()))
        for (file, _), p in zip(batch, class_probabilities(logits), strict=True)
    ]
