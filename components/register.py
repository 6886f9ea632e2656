"""Register step: the quality gate between a trained model and the MLflow Model Registry.

python -m components.register --mlflow-run-id RUN [--min-accuracy 0.85]

The model is judged by the test_accuracy the evaluate step logged into its run.
"""

from __future__ import annotations

import argparse

from components.core import schema
from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.names import MLFLOW_WAITS
from components.core.shutdown import skip_final_collection
from components.recipes.recipe import apply_preset
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.register",
        description=__doc__.splitlines()[0],
        epilog=MLFLOW_WAITS,
    )
    schema.add_arguments(parser, RegisterConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    apply_preset(parser, argv, RegisterConfig)
    cfg = schema.from_namespace(RegisterConfig, parser.parse_args(argv))
    setup_logging()
    skip_final_collection()
    with one_line_errors():
        print(register_if_accurate(cfg).reason)


if __name__ == "__main__":
    main()
