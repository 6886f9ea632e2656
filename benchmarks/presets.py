"""Presets on real photos: the tutorial's loop and each preset, side by side, one run.

The archive is extracted once; the tutorial script preprocesses and trains it as it is
(10 epochs, its own 10% split); each preset runs as a user runs it (``--preset``:
preprocess, train, evaluate the test split). Training seconds are the loops' own; a
preset's train step is also timed whole (start-up, validation, checkpoints, MLflow).

    python -m benchmarks.presets --archive ../shared/data/petimages-23k.zip --presets tutorial
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from benchmarks.common import base_parser, measure, report
from benchmarks.train import run_baseline
from components.recipes.recipe import recipe_values


def run_preset(name: str, images: Path, work: Path) -> dict:
    arrays, model, scores = work / f"{name}-arrays", work / f"{name}-model", work / name
    step = [sys.executable, "-m"]
    measure(
        [*step, "components.preprocess", "--input", str(images), "--output", str(arrays)]
        + ["--preset", name]
    )
    trained = measure(
        [*step, "components.train", "--data", str(arrays), "--output", str(model)]
        + ["--preset", name, "--device", "cpu"]
    )
    test = measure(
        [*step, "components.evaluate", "--model-dir", str(model), "--data", str(arrays)]
        + ["--output", str(scores), "--device", "cpu"]
    ).last_json()
    history = json.loads((model / "history.json").read_text())
    return {
        "run": f"preset {name}",
        "epochs": len(history),
        "train_s": round(sum(epoch["epoch_seconds"] for epoch in history), 1),
        "train_step_wall_s": round(trained.wall_seconds, 1),
        "val_accuracy": round(history[-1]["val_accuracy"], 4),
        "test_accuracy": round(test["accuracy"], 4),
        "gate": recipe_values(name)["min_accuracy"],
    }


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--archive", type=Path, required=True, help="petimages-23k.zip")
    parser.add_argument("--presets", nargs="+", default=["tutorial"], help="(default: tutorial)")
    parser.add_argument("--epochs", type=int, default=10, help="the tutorial loop's epochs")
    args = parser.parse_args()
    work = args.workdir / "presets"
    work.mkdir(parents=True, exist_ok=True)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{work / 'mlflow.db'}"
    images = work / "images"
    step = [sys.executable, "-m", "components.download"]
    measure([*step, "--source", str(args.archive.resolve()), "--output", str(images)])
    npy = work / "baseline.npy"  # the tutorial's own preprocess, then its loop
    measure([sys.executable, str(args.baseline), "preprocess", str(images / "PetImages"), str(npy)])
    base = run_baseline(args.baseline, npy, args.epochs)
    rows = [
        {
            "run": "tutorial loop (val: its own 10%)",
            "epochs": base["epochs"],
            "train_s": base["train_seconds"],
            "val_accuracy": base["val_accuracy"],
        }
    ]
    for name in args.presets:
        rows.append(run_preset(name, images, work))
    os.environ.pop("MLFLOW_TRACKING_URI")
    ratios = {
        f"{row['run']} train time / the tutorial loop's": row["train_s"] / base["train_seconds"]
        for row in rows[1:]
    }
    report("presets on real photos (CPU)", rows, ratios)


if __name__ == "__main__":
    main()
