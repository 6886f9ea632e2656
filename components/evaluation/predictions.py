"""Classifying image files with a model from a train output or an MLflow model URI.

The logic behind ``python -m components.predict``; it imports torch (and mlflow for a
URI), which the command line loads only once its arguments are parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from components.core.names import CLASSES
from components.data.arrays import shape_problems
from components.data.images import decode_file
from components.training.inference import default_batch_size
from components.training.models import load_classifier

URI_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")  # runs:, models:, s3:, file: (not C:)


def load_any(model: str) -> tuple[torch.nn.Module, int, int]:
    """A model from a train output folder, an MLflow model's folder (what
    ``components.fetch_model`` writes), or an MLflow URI (runs:/…, models:/…, s3://…).

    Returns it with the channels and image size it takes.

    Raises:
        FileNotFoundError: ``model`` is neither a URI nor an existing folder.
        ValueError: it is a file, or a model outside the data contract.
        TrackingUnavailableError: a ``runs:/`` or ``models:/`` URI whose tracking server
            does not answer (at once, not after MLflow's retries).
    """
    if not URI_SCHEME.match(model):
        folder = Path(model)
        if not folder.is_dir():
            found = "a file" if folder.exists() else "nothing there"
            raise FileNotFoundError(
                f"expected a train output folder, an MLflow model's folder or an MLflow "
                f"model URI (runs:/RUN/model, models:/NAME@ALIAS) as --model, found {found}: "
                f"{model}"
            )
        if not (folder / "MLmodel").is_file():
            classifier, spec = load_classifier(folder)
            return classifier, spec["channels"], spec["image_size"]
        model = folder.resolve().as_uri()  # fetched by components.fetch_model, say
    from components.core import tracking

    if model.startswith(("runs:/", "models:/")):
        tracking.check_server()
    shape = tracking.model_input_shape(model)
    square = len(shape) == 4 and shape[2] == shape[3]
    problems = shape_problems(shape[1], shape[2]) if square else ["square N×C×S×S images"]
    if problems:
        raise ValueError(
            f"expected a model at {model} that takes {'; '.join(problems)}, "
            f"found input shape {shape}"
        )
    return tracking.load_model(model), shape[1], shape[2]


@dataclass
class Predictions:
    """(file, class name, probability of that class) for each file that decodes, in
    order, and (file, why) for each that does not."""

    classified: list[tuple[Path, str, float]] = field(default_factory=list)
    skipped: list[tuple[Path, str]] = field(default_factory=list)


def predict_files(model: str, files: list[Path]) -> Predictions:
    """Classify image files, each decoded as the preprocess step decodes it.

    A file that is missing, empty, oversized or not a complete image is skipped with
    its reason, as the preprocess step skips it; the others are classified.

    Args:
        model: a train output directory or an MLflow model URI.
        files: the images.
    """
    net, channels, size = load_any(model)
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
    batch = default_batch_size(torch.device("cpu"))
    for start in range(0, len(decoded), batch):
        chunk = decoded[start : start + batch]
        pixels = torch.from_numpy(np.stack([pixels for _, pixels in chunk])).float()
        with torch.no_grad():
            probabilities = torch.softmax(net(pixels), dim=1).numpy()
        result.classified += [
            (file, CLASSES[int(p.argmax())], float(p.max()))
            for (file, _), p in zip(chunk, probabilities, strict=True)
        ]
    return result
