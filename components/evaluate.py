"""Evaluate step: a trained model on a held-out split -> metrics, plots, MLflow.

python -m components.evaluate --model DIR --data DIR --output DIR [--split test]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from components.core import schema
from components.core.logs import setup_logging
from components.evaluation.config import EvaluateConfig


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.evaluate", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--model", required=True, type=Path, help="directory written by the train step"
    )
    parser.add_argument(
        "--data", required=True, type=Path, help="directory written by the preprocess step"
    )
    parser.add_argument(
        "--output",
        required=True,
        type=Path,
        help="directory for metrics.json, roc.json and the PNGs",
    )
    schema.add_arguments(parser, EvaluateConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging()
    cfg = schema.from_namespace(EvaluateConfig, args)
    # torch and mlflow load only now: --help and a wrong flag answer at once
    from components.evaluation.report import evaluate

    report = evaluate(args.model, args.data, args.output, cfg)
    print(json.dumps({"split": cfg.split, "count": report["count"], **report["metrics"]}))


if __name__ == "__main__":
    main()
