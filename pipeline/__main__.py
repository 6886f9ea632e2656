"""Run the pipeline here, or compile or submit it for a cluster.

python -m pipeline run --local [--source URI] [name=value ...]       # here, with kfp.local
python -m pipeline sweep --local lr=0.001,0.003 model=tutorial_cnn,bn_cnn [name=value ...]
python -m pipeline compile --output pipeline.yaml [--image IMG] [--gpu-image IMG] [--cpu 8 ...]
python -m pipeline submit --host URL [--namespace NS] [name=value ...]   # on the cluster
python -m pipeline tune --output experiment.yaml [--trials N] [name=value ...]  # Katib's search
python -m pipeline tune --local --source ZIP --trials N [name=value ...]  # the same search here
"""

import argparse
import logging
import sys

from components.core.errors import one_line_errors
from components.core.logs import setup_logging
from components.core.shutdown import skip_final_collection
from components.recipes.presets import CLUSTER_PRESET, DEFAULT_PRESET
from components.recipes.recipe import Recipe, load_recipe, preset_in
from pipeline.arguments import (
    parse_arguments,
    refuse_credentials,
    refuse_missing_source,
    sweep_arguments,
)
from pipeline.cli import CLUSTER_COMMANDS, PROG, build_parser
from pipeline.parameters import parameters_of
from pipeline.road import placement_from
from pipeline.submit import Destination, submit
from pipeline.target import ClusterTarget
from pipeline.tune import run_tune

log = logging.getLogger(__name__)
# on this machine a failed task fails the run at once (retries are for lost pods), and a
# sweep's children train one after another (they would only share the same cores)
LOCAL_TARGET = ClusterTarget(train_retries=0, sweep_parallelism=1)


def run_here(args: argparse.Namespace, recipe: Recipe) -> None:
    """The whole pipeline on this machine, of ``recipe``; a line per task, then where
    everything is.

    The settings and a local source are checked before kfp, torch or MLflow load.
    """
    setup_logging("INFO" if args.verbose else "WARNING")
    sweep = args.command == "sweep"
    if not args.local:
        raise SystemExit(
            f"python -m pipeline {args.command} runs on this machine with kfp.local: add "
            f"--local; to run on a cluster: python -m pipeline submit{' --sweep' * sweep}"
        )
    refuse_missing_source(args.source)
    parse = sweep_arguments if sweep else parse_arguments
    on_gpu = LOCAL_TARGET.training.on_gpu
    arguments = parse(args.arguments, parameters_of(sweep, recipe=recipe, on_gpu=on_gpu), recipe)
    if args.source:
        if any(pair.startswith("source=") for pair in args.arguments):
            raise SystemExit("expected the source once, found both --source and source=")
        arguments["source"] = args.source
    refuse_credentials(arguments, ("source",))  # the tracking URI's move to the environment
    if arguments.get("deploy"):
        raise SystemExit(
            "deploy=true needs KServe on a cluster: start the run there (python -m pipeline "
            "submit ... deploy=true), or serve the model here with python -m components.serve"
        )
    refuse_missing_source(arguments.get("source"))
    from pipeline.local import LocalRunError, run_local  # kfp, mlflow: loaded only to run
    from pipeline.pipeline import build_pipeline

    if not args.verbose:  # MLflow sets its own logger to INFO when imported
        logging.getLogger("mlflow").setLevel(logging.WARNING)
    try:
        function = build_pipeline(LOCAL_TARGET, sweep, recipe=recipe)
        print(run_local(function, arguments, args.workdir, args.verbose))
    except LocalRunError as err:
        raise SystemExit(str(err)) from None


def main(argv: list[str] | None = None) -> None:
    words = sys.argv[1:] if argv is None else argv
    named = preset_in(words, PROG)  # the one reading of --preset: refused in two lines
    here = named or load_recipe(DEFAULT_PRESET)
    cluster = named or load_recipe(CLUSTER_PRESET)
    args = build_parser(__doc__.splitlines()[0], here, cluster).parse_args(words)
    skip_final_collection()
    if args.command in ("run", "sweep"):
        run_here(args, here)
        return
    if args.command == "tune":
        setup_logging("WARNING")
        with one_line_errors():
            run_tune(args, here)
        return
    assert args.command in CLUSTER_COMMANDS
    setup_logging()
    with one_line_errors():
        target = ClusterTarget(
            image=args.image,
            gpu_image=args.gpu_image,
            nodes=args.nodes,
            preprocess_pods=args.preprocess_pods,
            trainer_runtime=args.trainer_runtime,
            training=placement_from(args, cluster),
            kfp_backend=args.kfp_backend,
        )
        if args.command == "compile":
            from pipeline.spec import compile_pipeline  # kfp: loaded only to compile

            spec = compile_pipeline(args.output, target, args.sweep, args.tune, cluster)
            log.info("wrote %s (its defaults: %s's)", spec, cluster.name)
            return
        destination = Destination(
            host=args.host,
            namespace=args.namespace,
            token=args.token,
            experiment=args.experiment,
            run_name=args.run_name,
            service_account=args.service_account,
            timeout_seconds=args.timeout_seconds,
        )
        run = submit(destination, args.arguments, target, args.sweep, cluster, args.tune)
    print(f"submitted run {run.run_id}: {run.url}")


if __name__ == "__main__":
    main()
