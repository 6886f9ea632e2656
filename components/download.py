"""Download step: fetch the PetImages archive, verify it, extract it safely.

python -m components.download --source URI --output DIR [--sha256 HEX]
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import asdict

from components.core import schema
from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.shutdown import skip_final_collection
from components.downloading.config import DownloadConfig
from components.downloading.fetch import download

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.download", description=__doc__.splitlines()[0]
    )
    schema.add_arguments(parser, DownloadConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    cfg = schema.from_namespace(DownloadConfig, build_parser().parse_args(argv))
    setup_logging()
    skip_final_collection()
    with one_line_errors():
        log.info("%s", json.dumps(asdict(download(cfg))))


if __name__ == "__main__":
    main()
