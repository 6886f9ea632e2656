"""The last lines of a run here: where to look in MLflow, and what to type next."""

from __future__ import annotations

import math
import re
from typing import Any

from components.core.names import REGISTERED_MODEL_NAME
from components.registration.config import RegisterConfig


def closing_lines(
    registration: str, test_accuracy: float, tracking_uri: str, arguments: dict[str, Any]
) -> list[str]:
    """The MLflow UI's command (for a store on this machine) and the next step."""
    lines = []
    if tracking_uri.startswith("sqlite:///"):
        lines.append(
            f"MLflow UI:     mlflow ui --backend-store-uri {tracking_uri} "
            "(then open the pages above)"
        )
    lines.append(
        f"next:          {next_step(registration, test_accuracy, tracking_uri, arguments)}"
    )
    return lines


def next_step(
    registration: str, test_accuracy: float, tracking_uri: str, arguments: dict[str, Any]
) -> str:
    """What to type next: serve the alias's model, or why the gate said no and how to pass
    it on this data."""
    name = arguments.get("registered_model_name", REGISTERED_MODEL_NAME)
    serve = f"MLFLOW_TRACKING_URI={tracking_uri} python -m components.serve --model models:/{name}"
    unaliased = re.search(r" version (\d+) without @", registration)
    if unaliased:
        return (
            f"@candidate stays on the better version: serve it with {serve}@candidate "
            f"--port 8080, or this one with models:/{name}/{unaliased[1]}"
        )
    if registration.startswith("registered"):
        return f"serve it: {serve}@candidate --port 8080 (README: Serve the model)"
    wanted = arguments.get("min_accuracy", RegisterConfig.min_accuracy)
    bound = re.search(r", at least ([\d.]+) with 95% confidence", registration)
    lowest = float(bound[1]) if bound else test_accuracy
    return (
        f"the gate wants a test accuracy of at least {wanted:.2f} with 95% confidence and "
        f"this model reached {test_accuracy:.4f}, at least {lowest:.4f}: train a stronger one "
        "(more photos: for PetImages, the whole archive with no --source; or a stronger "
        "preset), or, to walk "
        "the rest of the road on this data, run again with a lower gate: add "
        f"min_accuracy={math.floor(lowest * 100) / 100:.2f}"
    )
