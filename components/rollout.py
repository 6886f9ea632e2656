"""Rollout step: end a canary, promoting its version to all the traffic or rolling it back.

python -m components.rollout promote|rollback [--name dogs-vs-cats] [--namespace NS]

Waits until KServe reports the service serving as asked and prints its URL. Uses the
in-cluster service account inside a pod, else the current kubeconfig context.
"""

from __future__ import annotations

import argparse

from components.core import schema
from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.shutdown import skip_final_collection
from components.deploying.config import PROMOTE, ROLLBACK, RolloutConfig


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m components.rollout", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "action",
        choices=(PROMOTE, ROLLBACK),
        help="promote: the canary's version takes all the traffic; rollback: the canary goes",
    )
    schema.add_arguments(parser, RolloutConfig)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    cfg = schema.from_namespace(RolloutConfig, args)
    setup_logging()
    skip_final_collection()
    # the Kubernetes client loads only to act: --help answers at once
    from components.cluster.kube import api_client
    from components.deploying import release

    end = release.promote if args.action == PROMOTE else release.rollback
    with one_line_errors():
        print(end(cfg, api_client()))


if __name__ == "__main__":
    main()
