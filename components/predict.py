"""Classify image files with a trained model, from a train output or an MLflow model URI.

python -m components.predict --model DIR_OR_MLFLOW_URI IMAGE [IMAGE ...]

Prints a line per image: file, class, probability. Files that are not complete images
are named on stderr with the reason, and the exit status is then 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from components.core.errors import one_line_errors, printable
from components.core.logs import setup_logging
from components.core.names import SCORING_RUNTIMES
from components.core.shutdown import skip_final_collection

log = logging.getLogger(__name__)


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
    parser.add_argument(
        "--runtime",
        choices=SCORING_RUNTIMES,
        default="auto",
        help="onnx (ONNX Runtime, the float32 graph) or torch; onnx-int8: the model's int8 "
        "graph (trained with --int8); auto (the default): the int8 graph where the model "
        "has one and this CPU has int8 dot products (VNNI), else the float32 graph",
    )
    parser.add_argument(
        "images", nargs="+", type=Path, help="image files (JPEG, PNG, ...), or folders of them"
    )
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging()
    skip_final_collection()
    # torch loads only now: --help and a wrong argument answer at once
    from components.evaluation.predictions import predict_files

    with one_line_errors():
        result = predict_files(args.model, args.images, args.runtime)
    for path, label, probability in result.classified:
        print(f"{printable(str(path))}\t{label}\t{probability:.4f}")
    for path, reason in result.skipped:
        log.warning("skipped %s: %s", printable(str(path)), reason)
    if result.skipped:
        total = len(result.skipped) + len(result.classified)
        sys.exit(f"{len(result.skipped)} of {total} files could not be classified")


if __name__ == "__main__":
    main()
