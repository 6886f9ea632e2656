"""``components.predict`` as typed, by runtime: accuracy on the held-out photos and photos/s.

python -m benchmarks.predict_runtimes --model models:/dogs-vs-cats@candidate \\
    --data runs/local/outputs/RUN/preprocess-op/arrays [--runtimes auto onnx] [--rounds 2]

Runs ``python -m components.predict --model MODEL [--runtime R] PHOTOS…`` on the test
photos preprocess kept (``test_photos/``, in the order of the test split's labels), once per
runtime a round, the runtimes alternating; prints each run's accuracy against the labels,
its wall seconds (start-up, the model's download and checks, decoding and scoring) and
photos/s, and the medians' ratio of each runtime to the last one named.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np

from benchmarks.common import REPO, machine, measure
from components.core.names import TEST_PHOTOS_DIR
from components.data.arrays import open_split, read_meta


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--runtimes", nargs="+", default=["auto", "onnx"])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    photos = sorted((args.data / TEST_PHOTOS_DIR).iterdir())
    classes = read_meta(args.data)["classes"]
    labels = open_split(args.data, "test").labels
    if len(photos) != len(labels):
        sys.exit(f"expected a kept photo per test label, found {len(photos)} and {len(labels)}")
    print(f"predict by runtime on {machine()}: {len(photos)} test photos, {args.model}")
    rates: dict[str, list[float]] = {runtime: [] for runtime in args.runtimes}
    for round_ in range(1, args.rounds + 1):
        for runtime in args.runtimes:
            command = [sys.executable, "-m", "components.predict", "--model", args.model]
            command += ["--runtime", runtime, *map(str, photos)]
            done = measure(command, cwd=REPO)
            answers = [line.split("\t") for line in done.stdout.splitlines() if "\t" in line]
            if len(answers) != len(photos):
                raise subprocess.SubprocessError(f"{runtime}: {len(answers)} answers")
            said = np.array([classes.index(label) for _, label, _ in answers])
            rate = len(photos) / done.wall_seconds
            rates[runtime].append(rate)
            print(
                f"round {round_}, --runtime {runtime}: accuracy {(said == labels).mean():.4f}, "
                f"{done.wall_seconds:.1f} s, {rate:.1f} photos/s, peak {done.peak_rss_mb:.0f} MiB",
                flush=True,
            )
    last = statistics.median(rates[args.runtimes[-1]])
    for runtime, seen in rates.items():
        rate = statistics.median(seen)
        print(f"--runtime {runtime}: median {rate:.1f} photos/s, {rate / last:.2f}x "
              f"--runtime {args.runtimes[-1]}")  # fmt: skip


if __name__ == "__main__":
    main()
