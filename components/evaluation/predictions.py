"""Classifying image files with a model from a train output or an MLflow model URI.

The logic behind ``python -m components.predict``; it imports torch (and mlflow for a
URI), which the command line loads only once its arguments are parsed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from components.core.names import CLASSES
from components.data.images import decode_bytes
from components.training.models import load_classifier


def load_any(model: str) -> tuple[torch.nn.Module, int, int]:
    """A model from a train output directory, or an MLflow URI (runs:/…, models:/…, s3://…).

    Returns it with the channels and image size it takes.
    """
    if Path(model).exists():
        classifier, spec = load_classifier(Path(model))
        return classifier, spec["channels"], spec["image_size"]
    from components.core import tracking

    loaded = tracking.load_model(model)
    _, channels, size, _ = tracking.model_input_shape(model)
    return loaded, channels, size


def predict_files(model: str, files: list[Path]) -> list[tuple[Path, str, float]]:
    """Classify image files, each decoded as the preprocess step decodes it.

    Args:
        model: a train output directory or an MLflow model URI.
        files: the images.

    Returns:
        (file, class name, probability of that class) for each file, in order.
    """
    net, channels, size = load_any(model)
    pixels = np.stack([decode_bytes(Path(f).read_bytes(), size, channels) for f in files])
    with torch.no_grad():
        probabilities = torch.softmax(net(torch.from_numpy(pixels).float()), dim=1).numpy()
    return [
        (f, CLASSES[int(p.argmax())], float(p.max()))
        for f, p in zip(files, probabilities, strict=True)
    ]
