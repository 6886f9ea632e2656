"""Serve a registered model version on KServe: create or update its InferenceService.

python -m components.deploy --model-version 3 --tracking-uri URL --image IMAGE [--namespace NS]

Waits until KServe reports it Ready and prints its URL; a version already serving under
the name keeps most of the traffic while the new one takes --canary-percent. Uses the
in-cluster service account inside a pod, else the current kubeconfig context.
"""

from __future__ import annotations

import argparse

from components.core import schema
from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.shutdown import skip_final_collection
from components.deploying.config import DeployConfig


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.deploy", description=__doc__.splitlines()[0]
    )
    schema.add_arguments(parser, DeployConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    cfg = schema.from_namespace(DeployConfig, args)
    setup_logging()
    skip_final_collection()
    # the Kubernetes client loads only to deploy: --help answers at once
    from components.cluster.kube import api_client
    from components.deploying.release import deploy

    with one_line_errors():
        print(deploy(cfg, api_client()))


if __name__ == "__main__":
    main()
