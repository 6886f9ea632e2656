"""int8 against float32: accuracy and scoring speed of a trained model's ONNX graphs.

python -m benchmarks.int8 --model runs/model --data runs/arrays [--rounds 3]

``--model`` is a train output (model.pt, model.onnx) and ``--data`` the preprocess output
it was trained on. The float32 graph is quantised as ``train --int8`` does (512 train
photos, picked by the run's ``--seed``), then on the val and test splits: each graph's
accuracy, and photos/s scored by eager torch, the float32 graph and the int8 graph in
ONNX Runtime (64 a batch, alternating in each round; medians).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from benchmarks.common import machine
from components.core.names import ONNX_FILE
from components.data.arrays import load_split
from components.scoring import int8
from components.scoring.loading import load_scorer
from components.scoring.scorers import OnnxScorer, score_batches, session_threads


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="the run's seed (train --seed)")
    args = parser.parse_args(argv)
    print(f"int8 benchmark on {machine()}")
    train, _ = load_split(args.data, "train")
    picked = int8.calibration_picks(len(train), args.seed)
    float_graph = (args.model / ONNX_FILE).read_bytes()
    started = time.perf_counter()
    int8_graph = int8.quantise(float_graph, train[picked])
    print(f"quantised in {time.perf_counter() - started:.1f} s: {len(float_graph) / 1e6:.2f} MB "
          f"float32, {len(int8_graph) / 1e6:.2f} MB int8")  # fmt: skip
    scorers = {
        "torch": load_scorer(str(args.model), "torch").scorer,
        "onnx": OnnxScorer(float_graph, session_threads()),
        "onnx-int8": OnnxScorer(int8_graph, session_threads()),
    }
    for split in ("val", "test"):
        images, labels = load_split(args.data, split)
        pixels = images.astype(np.float32)
        rates: dict[str, list[float]] = {name: [] for name in scorers}
        for name, scorer in scorers.items():
            logits = score_batches(scorer, pixels)
            print(f"{split}: {name} accuracy {(logits.argmax(1) == labels).mean():.4f}")
        for _ in range(args.rounds):
            for name, scorer in scorers.items():
                started = time.perf_counter()
                score_batches(scorer, pixels)
                rates[name].append(len(pixels) / (time.perf_counter() - started))
        medians = {name: statistics.median(values) for name, values in rates.items()}
        for name, rate in medians.items():
            print(
                f"{split}: {name} {rate:.0f} photos/s (rounds: "
                f"{', '.join(f'{value:.0f}' for value in rates[name])}), "
                f"{rate / medians['torch']:.2f}x torch, {rate / medians['onnx']:.2f}x onnx"
            )


if __name__ == "__main__":
    main()
