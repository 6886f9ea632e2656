"""The GPU: the tutorial's loop and the project's side by side on one GPU; the accurate
preset's accuracy.

    python -m benchmarks.gpu speed --images DIR
    python -m benchmarks.gpu accuracy --images DIR [--preset cpu] --candidate '{"epochs": 40}' ...

``speed`` preprocesses ``DIR`` (a folder holding PetImages/) with the tutorial's script and
the project's step, then times training and evaluation: the tutorial's loop, and the
project's at batch 100 and larger, with bf16, channels-last and torch.compile each turned
off in turn. ``accuracy`` trains a preset's recipe (the accurate one unless ``--preset``
says) with each candidate's changes, picks the best by validation accuracy, and scores the
test split with it alone. A CPU preset's recipe searched here still has its time measured
on the CPU it is for.

The project's figures come from the train step's own epoch loop and batched inference
(``components.training``), run without MLflow, which the GPU machine does not have.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks.common import Measured, base_parser, measure, report
from benchmarks.evaluate import project_images_per_second
from benchmarks.train import run_baseline
from components.core.schema import pick
from components.data.arrays import read_meta
from components.recipes.presets import PRESETS
from components.recipes.recipe import recipe_values
from components.training.batches import DeviceSplit
from components.training.config import TrainConfig
from components.training.inference import predict_logits
from components.training.loop import Learner, new_learner, run_epoch
from components.training.runtime import Workers


@dataclass(frozen=True)
class Variant:
    """One way of running the same training: the batch size and which speed-ups are on."""

    batch_size: int
    amp: bool = True
    channels_last: bool = True
    compile: bool = True

    @property
    def name(self) -> str:
        off = [n for n in ("amp", "channels_last", "compile") if not getattr(self, n)]
        return f"batch {self.batch_size}" + (f", {', '.join(off)} off" if off else ", all on")


def ablations(batch_size: int) -> list[Variant]:
    """All speed-ups on, each one off in turn, and all off."""
    return [
        Variant(batch_size),
        Variant(batch_size, amp=False),
        Variant(batch_size, channels_last=False),
        Variant(batch_size, compile=False),
        Variant(batch_size, amp=False, channels_last=False, compile=False),
    ]


def preprocess(images: Path, work: Path, baseline: Path) -> tuple[list[dict], Path]:
    """The tutorial's preprocess and the project's (both presets): whole-process speed."""
    npy = work / "baseline.npy"
    run = measure(
        [sys.executable, str(baseline), "preprocess", str(images / "PetImages"), str(npy)]
    )
    rows = [_preprocess_row("tutorial preprocess (cv2 grey 50)", run.last_json()["images"], run)]
    for preset in ("tutorial", "accurate"):
        arrays, run = preprocess_preset(images, work, preset)
        kept = sum(sum(counts.values()) for counts in read_meta(arrays)["counts"].values())
        rows.append(_preprocess_row(f"project preprocess, {preset}", kept, run))
    return rows, npy


def preprocess_preset(images: Path, work: Path, preset: str) -> tuple[Path, Measured]:
    arrays = work / f"{preset}-arrays"
    step = [sys.executable, "-m", "components.preprocess", "--input", str(images)]
    return arrays, measure([*step, "--output", str(arrays), "--preset", preset])


def _preprocess_row(name: str, images: int, run: Measured) -> dict:
    rate = images / run.wall_seconds
    return {
        "run": name,
        "images": images,
        "wall_s": round(run.wall_seconds, 2),
        "images_per_s": round(rate, 1),
    }


def train_epochs(arrays: Path, cfg: TrainConfig, device, channels_last: bool = True) -> tuple:
    """The train step's epochs on ``arrays``: the learner and the per-epoch metrics."""
    train, val = DeviceSplit.load(arrays, "train", device), DeviceSplit.load(arrays, "val", device)
    steps = math.ceil(len(train) / cfg.batch_size)
    learner = new_learner(cfg, read_meta(arrays), Workers(), device, steps, channels_last)
    history = [
        run_epoch(learner, train, val, cfg, epoch, Workers()) for epoch in range(1, cfg.epochs + 1)
    ]
    return learner, history


def time_variant(arrays: Path, model: str, variant: Variant, epochs: int, device) -> dict:
    """Steady images/s (the median epoch after the first, which compiles) and peak memory."""
    cfg = TrainConfig(
        data=str(arrays),
        output="-",
        model=model,
        epochs=epochs,
        batch_size=variant.batch_size,
        amp=variant.amp,
        compile=variant.compile,
        lr=0.001,
    )
    _, history = train_epochs(arrays, cfg, device, variant.channels_last)
    return {
        "run": f"project {model}, {variant.name}",
        "train_images_per_s": round(
            statistics.median(e["images_per_second"] for e in history[1:]), 1
        ),
        "first_epoch_s": round(history[0]["epoch_seconds"], 2),
        "gpu_memory_peak_mb": round(max(e.get("gpu_memory_peak_mb", 0) for e in history), 1),
    }


def speed(args) -> None:
    work = args.workdir / "gpu"
    work.mkdir(parents=True, exist_ok=True)
    rows, npy = preprocess(args.images, work, args.baseline)
    tutorial = run_baseline(args.baseline, npy, args.epochs, device=args.device)
    rows.append(
        {
            "run": "tutorial loop (batch 100)",
            "train_images_per_s": tutorial["train_images_per_s"],
            "eval_images_per_s": tutorial["eval_images_per_s"],
        }
    )
    grey, rgb = work / "tutorial-arrays", work / "accurate-arrays"
    device = torch.device(args.device)
    rate, _ = project_images_per_second(grey, device, repeats=20)
    rows.append({"run": "project evaluation, batches of 1024", "eval_images_per_s": round(rate, 1)})
    if "tutorial_cnn" in args.nets:
        larger = [Variant(4000), Variant(4000, compile=False)]
        for variant in ablations(100) + ablations(1000) + larger:
            rows.append(time_variant(grey, "tutorial_cnn", variant, args.epochs, device))
    accurate = pick(TrainConfig, recipe_values("accurate"))
    if accurate["model"] in args.nets:
        for variant in ablations(accurate["batch_size"]):
            rows.append(time_variant(rgb, accurate["model"], variant, 3, device))
    ratios = {
        f"{row['run']} / tutorial loop, train images/s": row["train_images_per_s"]
        / tutorial["train_images_per_s"]
        for row in rows
        if "tutorial_cnn" in row["run"]
    }
    ratios["evaluation images/s, project / tutorial loop"] = rate / tutorial["eval_images_per_s"]
    report(f"speed on {device_name(device)}", rows, ratios)


def accuracy(args) -> None:
    """Each candidate recipe trained; the best by val accuracy scores the test split."""
    work = args.workdir / "gpu"
    arrays = work / f"{args.preset}-arrays"
    if not arrays.exists():
        preprocess_preset(args.images, work, args.preset)
    base = pick(TrainConfig, recipe_values(args.preset))
    device = torch.device(args.device)
    rows, best = [], None
    for index, changes in enumerate(json.loads(text) for text in args.candidate):
        cfg = TrainConfig(data=str(arrays), output="-", **{**base, **changes})
        learner, history = train_epochs(arrays, cfg, device)
        row = {
            "run": f"candidate {index}: {json.dumps(changes)}",
            "epochs": cfg.epochs,
            "train_s": round(sum(e["epoch_seconds"] for e in history), 1),
            "val_accuracy": round(history[-1]["val_accuracy"], 4),
            "gpu_memory_peak_mb": round(max(e.get("gpu_memory_peak_mb", 0) for e in history), 1),
        }
        print(json.dumps({**row, "history": history}), flush=True)
        rows.append(row)
        if best is None or row["val_accuracy"] > best[0]["val_accuracy"]:
            best = (row, learner)
    assert best is not None
    best[0]["test_accuracy"] = round(score_test_split(best[1], arrays, device), 4)
    report(f"{args.preset} preset candidates on {device_name(device)}", rows, {})


def score_test_split(learner: Learner, arrays: Path, device) -> float:
    test = DeviceSplit.load(arrays, "test", device)
    return (predict_logits(learner.model, test).argmax(1) == test.labels).float().mean().item()


def device_name(device: torch.device) -> str:
    return torch.cuda.get_device_name(device) if device.type == "cuda" else "the CPU"


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("stage", choices=("speed", "accuracy"))
    parser.add_argument("--images", type=Path, required=True, help="folder holding PetImages/")
    parser.add_argument("--epochs", type=int, default=4, help="epochs of each speed run")
    parser.add_argument("--device", default="cuda", help="(default: cuda)")
    parser.add_argument(
        "--nets",
        nargs="+",
        default=["tutorial_cnn", "resnet18"],
        help="the nets whose speed-ups to time (default: the tutorial's and the accurate preset's)",
    )
    parser.add_argument(
        "--candidate", action="append", default=[], help="JSON of recipe changes (accuracy)"
    )
    parser.add_argument(
        "--preset", choices=list(PRESETS), default="accurate", help="whose recipe (accuracy)"
    )
    args = parser.parse_args()
    speed(args) if args.stage == "speed" else accuracy(args)


if __name__ == "__main__":
    main()
