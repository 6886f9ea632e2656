"""Train: the project's loop against the tutorial's, same data, same batch size, one run.

Throughput on a full-size archive; time to the tutorial's final validation accuracy on
the PetImages sample (whose photos are all distinct, unlike the stand-in archive's).

    python -m benchmarks.train --images runs/bench/archive \\
        --sample tests/fixtures/petimages-sample.zip
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

from benchmarks.common import base_parser, measure, report


def prepare(images: Path, workdir: Path, name: str, baseline: Path) -> tuple[Path, Path]:
    """The same photos as the baseline's pickled array and as the project's arrays."""
    npy, arrays = workdir / f"{name}-baseline.npy", workdir / f"{name}-arrays"
    measure([sys.executable, str(baseline), "preprocess", str(images / "PetImages"), str(npy)])
    measure(
        [
            sys.executable,
            "-m",
            "components.preprocess",
            "--input",
            str(images),
            "--output",
            str(arrays),
            "--image-size",
            "50",
            "--channels",
            "1",
        ]
    )
    return npy, arrays


def run_baseline(baseline: Path, npy: Path, epochs: int, device: str = "cpu") -> dict:
    run = measure(
        [
            sys.executable,
            str(baseline),
            "train",
            str(npy),
            "--epochs",
            str(epochs),
            "--device",
            device,
        ]
    )
    return {**run.last_json(), "wall_s": run.wall_seconds, "peak_rss_mb": run.peak_rss_mb}


def run_project(arrays: Path, output: Path, epochs: int, extra: list[str]) -> dict:
    run = measure(
        [
            sys.executable,
            "-m",
            "components.train",
            "--data",
            str(arrays),
            "--output",
            str(output),
            "--epochs",
            str(epochs),
            "--batch-size",
            "100",
            "--lr",
            "0.001",
            "--device",
            "cpu",
            *extra,
        ]
    )
    history = json.loads((output / "history.json").read_text())
    return {"history": history, "wall_s": run.wall_seconds, "peak_rss_mb": run.peak_rss_mb}


def seconds_to_reach(history: list[dict], accuracy: float) -> float | None:
    """Training seconds until the first scored epoch whose val accuracy reaches
    ``accuracy`` (epochs between validations, ``validate_every``, have none)."""
    elapsed = 0.0
    for epoch in history:
        elapsed += epoch["epoch_seconds"]
        if epoch.get("val_accuracy", 0.0) >= accuracy:
            return elapsed
    return None


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--images", type=Path, required=True, help="full-size archive folder")
    parser.add_argument("--sample", type=Path, required=True, help="petimages-sample.zip")
    parser.add_argument("--epochs", type=int, default=5, help="the tutorial's 5 (default)")
    parser.add_argument(
        "--max-epochs",
        type=int,
        default=10,
        help="the project's budget to reach the baseline's accuracy",
    )
    args = parser.parse_args()
    work = args.workdir / "train"
    work.mkdir(parents=True, exist_ok=True)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{work / 'mlflow.db'}"

    npy, arrays = prepare(args.images, work, "archive", args.baseline)
    base = run_baseline(args.baseline, npy, args.epochs)
    mine = run_project(arrays, work / "model-archive", args.epochs, [])
    project_rate = sum(e["images_per_second"] for e in mine["history"]) / len(mine["history"])
    rows = [
        {
            "run": "baseline, archive",
            "train_images_per_s": base["train_images_per_s"],
            "train_s": base["train_seconds"],
            "peak_rss_mb": round(base["peak_rss_mb"], 1),
        },
        {
            "run": "project, archive",
            "train_images_per_s": round(project_rate, 1),
            "train_s": round(sum(e["epoch_seconds"] for e in mine["history"]), 2),
            "peak_rss_mb": round(mine["peak_rss_mb"], 1),
        },
    ]
    ratios = {"train images/s, project / baseline": project_rate / base["train_images_per_s"]}

    sample_dir = work / "sample"
    if not sample_dir.exists():
        zipfile.ZipFile(args.sample).extractall(sample_dir)
    npy, arrays = prepare(sample_dir, work, "sample", args.baseline)
    base = run_baseline(args.baseline, npy, args.epochs)
    mine = run_project(arrays, work / "model-sample", args.max_epochs, [])
    reached = seconds_to_reach(mine["history"], base["val_accuracy"])
    rows += [
        {
            "run": "baseline, sample",
            "val_accuracy": base["val_accuracy"],
            "train_s": base["train_seconds"],
        },
        {
            "run": "project, sample",
            "val_accuracy": round(mine["history"][-1]["val_accuracy"], 4),
            "train_s": round(sum(e["epoch_seconds"] for e in mine["history"]), 2),
            "s_to_baseline_accuracy": reached,
        },
    ]
    if reached:
        ratios["time to the baseline's val accuracy, baseline / project"] = (
            base["train_seconds"] / reached
        )
    report("train (CPU, tutorial_cnn, grey 50x50, batch 100)", rows, ratios)


if __name__ == "__main__":
    main()
