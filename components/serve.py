"""Serve a trained model with KServe's model server: photos in, classes out.

python -m components.serve --model DIR_OR_MLFLOW_URI [--host H] [--port P]

V1: POST /v1/models/dogs-vs-cats:predict {"instances": [{"image": {"b64": "..."}}]};
v2: POST /v2/models/dogs-vs-cats/infer with one BYTES input "image". Ready once
GET /v1/models/dogs-vs-cats answers 200; Prometheus metrics at /metrics.
"""

from __future__ import annotations

import argparse
import sys

from components.core import schema
from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.shutdown import skip_final_collection
from components.serving.config import ServeConfig


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.serve", description=__doc__.splitlines()[0]
    )
    schema.add_arguments(parser, ServeConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    cfg = schema.from_namespace(ServeConfig, args)
    setup_logging()
    skip_final_collection()
    sys.argv[1:] = []  # kserve parses sys.argv when imported; these flags are ours, parsed
    with one_line_errors():
        if cfg.model.startswith("models:/"):
            from components.tracking.registry import check_registered

            check_registered(cfg.model)  # at once, before the server and the model load
        from components.serving.server import serve  # kserve loads only now

        serve(cfg)


if __name__ == "__main__":
    main()
