"""Classify image files with a trained model, from a train output or an MLflow model URI.

python -m components.predict --model DIR_OR_MLFLOW_URI IMAGE [IMAGE ...]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from components.core.logs import setup_logging


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.predict", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--model",
        required=True,
        help="train output directory, or an MLflow model URI such as "
        "runs:/RUN_ID/model or models:/NAME@candidate",
    )
    parser.add_argument("images", nargs="+", type=Path, help="image files (JPEG, PNG, ...)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging()
    # torch loads only now: --help and a wrong argument answer at once
    from components.evaluation.predictions import predict_files

    for path, label, probability in predict_files(args.model, args.images):
        print(f"{path}\t{label}\t{probability:.4f}")


if __name__ == "__main__":
    main()
