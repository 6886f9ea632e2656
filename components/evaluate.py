"""Evaluate step: a trained model on a held-out split -> metrics, plots, MLflow.

python -m components.evaluate --model DIR --data DIR --output DIR [--split test]
"""

from __future__ import annotations

import argparse
import json

from components.core import schema
from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.names import MLFLOW_WAITS
from components.core.shutdown import skip_final_collection
from components.evaluation.config import EvaluateConfig


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.evaluate",
        description=__doc__.splitlines()[0],
        epilog=MLFLOW_WAITS,
    )
    schema.add_arguments(parser, EvaluateConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    cfg = schema.from_namespace(EvaluateConfig, build_parser().parse_args(argv))
    setup_logging()
    skip_final_collection()
    # torch and mlflow load only now: --help and a wrong flag answer at once
    from components.evaluation.report import evaluate

    with one_line_errors():
        report = evaluate(cfg)
    print(json.dumps({"split": cfg.split, "count": report["count"], **report["metrics"]}))


if __name__ == "__main__":
    main()
