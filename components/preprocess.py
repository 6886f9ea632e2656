"""Preprocess step: images -> uint8 .npy arrays + meta.json, split train/val/test.

python -m components.preprocess --input DIR --output DIR [--image-size 50] [--channels 1|3]
"""

from __future__ import annotations

import argparse

from components.core import schema
from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.shutdown import skip_final_collection
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from components.recipes.recipe import apply_preset


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.preprocess", description=__doc__.splitlines()[0]
    )
    schema.add_arguments(parser, PreprocessConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = build_parser()
    apply_preset(parser, argv, PreprocessConfig)
    cfg = schema.from_namespace(PreprocessConfig, parser.parse_args(argv))
    setup_logging()
    skip_final_collection()
    with one_line_errors():
        build_arrays(cfg)


if __name__ == "__main__":
    main()
