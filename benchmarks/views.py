"""Test-time views on trained models: the val accuracy of each with one, two, five and ten.

Each model (a train output folder) scores the val split of ``--data`` (the preprocess
output it was trained on) in float32, as the served model does, four times: the photo
alone, with its mirror image, with four shifted copies, and with both (ten views).

    python -m benchmarks.views --data ARRAYS MODEL_DIR [MODEL_DIR ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import machine
from components.data.arrays import load_split
from components.networks.models import load_classifier

# name: (mirror_average, shift_average)
VIEWS = {
    "one": (False, False),
    "mirror": (True, False),
    "shifts": (False, True),
    "ten": (True, True),
}
BATCH = 250


def val_accuracies(model_dir: Path, images: np.ndarray, labels: np.ndarray) -> dict[str, float]:
    """The model's val accuracy with each set of ``VIEWS``."""
    model, _ = load_classifier(model_dir / "model.pt")
    model.eval()
    accuracies = {}
    for name, (mirror, shift) in VIEWS.items():
        model.mirror_average, model.shift_average = mirror, shift
        with torch.no_grad():
            predicted = np.concatenate(
                [
                    model(torch.from_numpy(images[start : start + BATCH])).argmax(1).numpy()
                    for start in range(0, len(images), BATCH)
                ]
            )
        accuracies[name] = round(float((predicted == labels).mean()), 4)
    return accuracies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the preprocess output")
    parser.add_argument("models", type=Path, nargs="+", help="train output folders")
    args = parser.parse_args(argv)
    print(machine())
    images, labels = load_split(args.data, "val")
    for model_dir in args.models:
        print(json.dumps({"model": str(model_dir), **val_accuracies(model_dir, images, labels)}))


if __name__ == "__main__":
    main()
