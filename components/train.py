"""Train step: arrays -> a trained classifier, a checkpoint every epoch, tracked in MLflow.

python -m components.train --data DIR --output DIR [--model tutorial_cnn] [--epochs 10]
"""

from __future__ import annotations

import argparse
import json
import sys

from components.core import schema
from components.core.errors import STOPPED_BY_CTRL_C, STOPPED_BY_SIGTERM, one_line_errors
from components.core.logs import setup_logging
from components.core.names import MLFLOW_WAITS
from components.core.shutdown import skip_final_collection
from components.recipes.recipe import apply_preset
from components.training.config import TrainConfig
from components.training.stopping import stop_at_next_batch_on_sigterm


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.train",
        description=__doc__.splitlines()[0],
        epilog=MLFLOW_WAITS,
    )
    schema.add_arguments(parser, TrainConfig)
    return parser


def parse_config(argv: list[str] | None = None) -> TrainConfig:
    """The TrainConfig of a command line, ``--preset`` applied under the explicit flags."""
    parser = build_parser()
    apply_preset(parser, argv, TrainConfig)
    return schema.from_namespace(TrainConfig, parser.parse_args(argv))


def main(argv: list[str] | None = None) -> None:
    cfg = parse_config(argv)
    setup_logging()
    skip_final_collection()
    # torch and mlflow load only now: --help and a wrong flag answer at once
    from components.training.session import train
    from components.tuning.report import print_metrics_line

    # what Kubernetes sends a pod it evicts: the run stops at its next batch as on Ctrl-C,
    # its MLflow run KILLED
    try:
        with stop_at_next_batch_on_sigterm(), one_line_errors():
            result = train(cfg, on_epoch=print_metrics_line if cfg.metrics_stdout else None)
    except SystemExit as end:
        if end.code in (STOPPED_BY_CTRL_C, STOPPED_BY_SIGTERM):
            from components.training.checkpoints import resume_hint

            print(resume_hint(cfg, sys.argv[1:] if argv is None else argv), file=sys.stderr)
        raise
    if result.run_id:  # rank 0 alone reports
        print(
            json.dumps(
                {
                    "mlflow_run_id": result.run_id,
                    "model_uri": result.model_uri,
                    **result.history[-1],
                }
            )
        )


if __name__ == "__main__":
    main()
