"""Evaluate: batched inference against the tutorial's per-image loop, same split size.

The tutorial's figure comes from its own train command (it evaluates after training);
the project's is `predict_logits` over the same number of 50×50 grey images, at the
device's default batch size and at 1,024.

    python -m benchmarks.evaluate --arrays runs/bench/train/archive-arrays \\
        --npy runs/bench/train/archive-baseline.npy
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

from benchmarks.common import base_parser, measure, report
from components.networks.models import Classifier, build_model
from components.training.batches import DeviceSplit
from components.training.inference import default_batch_size, predict_logits
from components.training.runtime import pick_device


def project_images_per_second(
    arrays: Path, device: torch.device, batch_size: int, repeats: int = 3
) -> tuple:
    data = DeviceSplit.load(arrays, "test", device)
    model = Classifier(build_model("tutorial_cnn", 1, 50), [0.5], [0.25]).to(device)
    predict_logits(model, data, batch_size)  # warm-up
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        predict_logits(model, data, batch_size).cpu()  # .cpu() waits for the device
        best = min(best, time.perf_counter() - started)
    return len(data) / best, len(data)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--arrays", type=Path, required=True, help="the project's arrays")
    parser.add_argument("--npy", type=Path, required=True, help="the baseline's pickled array")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    args = parser.parse_args()
    baseline = measure(
        [
            sys.executable,
            str(args.baseline),
            "train",
            str(args.npy),
            "--epochs",
            "1",
            "--device",
            args.device,
        ]
    ).last_json()
    device = pick_device(args.device)
    rows = [
        {
            "run": "baseline, per-image loop",
            "images": baseline["val_images"],
            "images_per_s": baseline["eval_images_per_s"],
        }
    ]
    ratios = {}
    for batch_size in sorted({default_batch_size(device), 1024}):
        rate, count = project_images_per_second(args.arrays, device, batch_size)
        run = f"project, batches of {batch_size}"
        rows.append({"run": run, "images": count, "images_per_s": round(rate, 1)})
        ratios[f"images/s, {run} / baseline"] = rate / baseline["eval_images_per_s"]
    report(f"evaluate ({args.device})", rows, ratios)


if __name__ == "__main__":
    main()
