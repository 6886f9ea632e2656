"""The whole local pipeline against the same four steps run directly: orchestration overhead.

python -m benchmarks.pipeline --sample tests/fixtures/petimages-sample.zip
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from benchmarks.common import base_parser, measure, report

PARAMS = {"epochs": "1", "image_size": "50", "channels": "1"}


def direct_steps(sample: Path, work: Path) -> float:
    """Download, preprocess, train and evaluate as four commands; their wall seconds added."""
    python = [sys.executable, "-m"]
    steps = [
        ["components.download", "--source", str(sample), "--output", str(work / "raw")],
        ["components.preprocess", "--input", str(work / "raw"), "--output", str(work / "arrays")],
        [
            "components.train",
            "--data",
            str(work / "arrays"),
            "--output",
            str(work / "model"),
            "--epochs",
            PARAMS["epochs"],
        ],
        [
            "components.evaluate",
            "--model-dir",
            str(work / "model"),
            "--data",
            str(work / "arrays"),
            "--output",
            str(work / "eval"),
        ],
    ]
    return sum(measure(python + step).wall_seconds for step in steps)


def main() -> None:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, required=True)
    args = parser.parse_args()
    work = args.workdir / "pipeline"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    os.environ["MLFLOW_TRACKING_URI"] = f"sqlite:///{work / 'direct-mlflow.db'}"
    direct = direct_steps(args.sample, work / "direct")
    del os.environ["MLFLOW_TRACKING_URI"]
    local = measure(
        [
            sys.executable,
            "-m",
            "pipeline",
            "run",
            "--local",
            "--source",
            str(args.sample),
            "--workdir",
            str(work / "local"),
            "min_accuracy=0",
            *(f"{k}={v}" for k, v in PARAMS.items()),
        ]
    )
    rows = [
        {"run": "four steps, directly", "wall_s": round(direct, 2)},
        {
            "run": "python -m pipeline run --local",
            "wall_s": round(local.wall_seconds, 2),
            "peak_rss_mb": round(local.peak_rss_mb, 1),
        },
    ]
    report("whole pipeline on the sample", rows, {"pipeline / direct": local.wall_seconds / direct})
    print(f"orchestration overhead: {local.wall_seconds - direct:.1f} s")


if __name__ == "__main__":
    main()
