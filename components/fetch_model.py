"""Fetch step: a registered model into a folder, as KServe's storage initializer.

python -m components.fetch_model models:/NAME/VERSION /mnt/models

KServe runs it in a model server's pod before the server starts (a ClusterStorageContainer
for ``models:/`` URIs, manifests/serving), with the two arguments it gives any storage
initializer; the server then loads the folder. Tracking server and credentials come from
the environment (MLFLOW_TRACKING_URI, MLFLOW_TRACKING_USERNAME/PASSWORD).
"""

from __future__ import annotations

import argparse

from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.shutdown import skip_final_collection


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.fetch_model", description=__doc__.splitlines()[0]
    )
    parser.add_argument("source", help="the registered model: models:/NAME/VERSION or @ALIAS")
    parser.add_argument("destination", help="an empty folder to write the model into")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging()
    skip_final_collection()
    from components.serving.fetch import fetch_model  # mlflow: loaded only to fetch

    with one_line_errors():
        print(fetch_model(args.source, args.destination))


if __name__ == "__main__":
    main()
