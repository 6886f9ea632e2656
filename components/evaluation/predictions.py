"""Classifying image files with a model from a train output or an MLflow model URI.

The logic behind ``python -m components.predict``; it imports ONNX Runtime, torch where
torch scores or reads a model.pt, and mlflow for a URI, which the command line loads only
once its arguments are parsed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from components.core.names import CLASSES
from components.data.images import decode_file
from components.scoring.loading import load_scorer
from components.scoring.scorers import CPU_BATCH, class_probabilities


@dataclass
class Predictions:
    """(file, class name, probability of that class) for each file that decodes, in
    order, and (file, why) for each that does not."""

    classified: list[tuple[Path, str, float]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def predict_files(model: str, files: list[Path], runtime: str = "auto") -> Predictions:
    """Classify image files, each decoded as the preprocess step decodes it.

    A file that is missing, empty, oversized or not a complete image is skipped with
    its reason, as the preprocess step skips it; the others are classified.

    Args:
        model: a train output directory or an MLflow model URI.
        files: the images.
        runtime: onnx, onnx-int8, torch or auto (``load_scorer``: the int8 graph where
            the model has one and this CPU multiplies int8 exactly, else the float32 one).
    """
    loaded = load_scorer(model, runtime)
    size, channels = loaded.image_size, loaded.channels
    result, decoded = Predictions(), []
    for file in map(Path, files):
        if not file.is_file():
            result.skipped.append((file, "not a file" if file.exists() else "no such file"))
            continue
        outcome = decode_file(file, size, channels)
        if outcome.pixels is None:
            result.skipped.append((file, str(outcome.reason)))
        else:
            decoded.append((file, outcome.pixels))
    for start in range(0, len(decoded), CPU_BATCH):
        chunk = decoded[start : start + CPU_BATCH]
        logits = loaded.scorer(np.stack([pixels for _, pixels in chunk]).astype(np.float32))
        probabilities = class_probabilities(logits)
        result.classified += [
            (file, CLASSES[int(p.argmax())], float(p.max()))
            for (file, _), p in zip(chunk, probabilities, strict=True)
        ]
    return result
