"""``python -m pipeline tune``: write Katib's Experiment for a cluster, or search here.

python -m pipeline tune --output experiment.yaml [--preset P] [--trials N] [name=value ...]
python -m pipeline tune --local --source ZIP --trials N [--preset P] [name=value ...]

``name=value`` pairs are the pipeline's parameters: a searched field given one value is
fixed (no longer searched); the rest of the recipe comes from the preset or the defaults.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from components.cluster.placement import Placement
from components.core import schema
from components.core.atomic import atomic_file
from components.core.logs import logged_to_file
from components.core.schema import RECIPE
from components.core.uris import split_credentials
from components.recipes.recipe import Recipe
from components.training.config import TrainConfig
from components.tuning.config import TuneConfig, check_search, trial_recipe
from components.tuning.search_space import Dimension, searched
from pipeline.arguments import parse_arguments, refuse_credentials, refuse_missing_source
from pipeline.parameters import PARAMETERS
from pipeline.road import add_placement_flags, placement_from
from pipeline.target import CLUSTER_TRACKING_URI, GPU_IMAGE, IMAGE

DEFAULT_NAME = "dogs-vs-cats-tune"
# what `tune --local` shows of its INFO lines: each trial's start and end, its epochs, the best
SHOWN = ("components.tuning.local", "components.training.loop", "components.tuning.runs")


def add_tune_command(commands: Any, recipe: Recipe) -> argparse.ArgumentParser:
    """The ``tune`` subcommand and its flags (``--preset`` aside); its help shows
    ``recipe``'s placement."""
    tune = commands.add_parser(
        "tune",
        help="search the training recipe: write a Katib Experiment (--output) or run the "
        "same search here (--local)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = tune.add_mutually_exclusive_group(required=True)
    where.add_argument("--output", "-o", type=Path, help="write the Experiment's YAML here")
    tune.add_argument(
        "--force", action="store_true", help="with --output: replace a file already there"
    )
    where.add_argument("--local", action="store_true", help="search on this machine (Optuna)")
    tune.add_argument(
        "--source",
        help="shorthand for source=URI: the archive to search on (with --local, or with "
        "--output and --data-job)",
    )
    schema.add_arguments(tune.add_argument_group("the search"), TuneConfig)
    # unset: their defaults, or the trial count where there are fewer trials;
    # the median rule's: their defaults, or what the trials and epochs allow
    tune.set_defaults(
        parallel_trials=None, max_failed_trials=None, min_trials_required=None, start_step=None
    )
    cluster = tune.add_argument_group("with --output: the cluster")
    cluster.add_argument("--name", default=DEFAULT_NAME, help="Experiment (default: %(default)s)")
    cluster.add_argument("--namespace", help="the profile's namespace (default: kubectl's)")
    cluster.add_argument(
        "--gpu-image", default=GPU_IMAGE, help="GPU trials' image (default: %(default)s)"
    )
    cluster.add_argument(
        "--cpu-image", default=IMAGE, help="CPU trials' image (default: %(default)s)"
    )
    cluster.add_argument(
        "--tracking-uri",
        default=CLUSTER_TRACKING_URI,
        help="MLflow for the trials (default: %(default)s)",
    )
    cluster.add_argument("--parent-run-id", help="nest each trial's MLflow run under this run")
    cluster.add_argument(
        "--data-job",
        type=Path,
        help="also write here a Job that downloads the archive (--source) and preprocesses "
        "it with the recipe's image size and channels onto the claim, where the trials read "
        "it: apply it and wait for it before the Experiment",
    )
    cluster.add_argument(
        "--shared-pvc",
        default="dogs-vs-cats-shared",
        help="ReadWriteMany claim holding NAME/arrays, the preprocess output "
        "(default: %(default)s)",
    )
    add_placement_flags(tune, recipe)
    here = tune.add_argument_group("with --local: this machine")
    here.add_argument(
        "--workdir", type=Path, default=Path("runs/tune"), help="(default: %(default)s)"
    )
    here.add_argument(
        "--enqueue",
        action="append",
        default=[],
        metavar="NAME=V,NAME=V",
        help="a trial to try before the sampler's own (repeatable), e.g. the preset's values",
    )
    tune.add_argument("arguments", nargs="*", metavar="name=value")
    return tune  # type: ignore[no-any-return]


def run_tune(args: argparse.Namespace, chosen: Recipe) -> None:
    """Write the Experiment, or run the search here and register its best model, around
    the ``chosen`` recipe."""
    if args.local:
        refuse_missing_source(args.source)
    arguments = parse_arguments(args.arguments, PARAMETERS, chosen)
    if args.source:
        arguments["source"] = args.source
    if args.local:
        refuse_missing_source(arguments.get("source"))
    refuse_credentials(arguments, ("source",))
    explicit = {pair.partition("=")[0] for pair in args.arguments}
    if "tracking_uri" in explicit:
        raise SystemExit(
            "expected the tracking server as --tracking-uri (with --output) or in "
            "$MLFLOW_TRACKING_URI (with --local), found tracking_uri= among the settings"
        )
    for name in ("parallel_trials", "max_failed_trials"):
        if getattr(args, name) is None:
            setattr(args, name, min(getattr(TuneConfig, name), args.trials))
    if args.min_trials_required is None:  # the default, below a small search's trials
        args.min_trials_required = max(1, min(TuneConfig.min_trials_required, args.trials - 1))
    recipe = TrainConfig(data="-", output="-", **schema.pick(TrainConfig, arguments))
    space = searched({name: None for name in explicit}, recipe.model)
    if args.start_step is None:  # the default, below a short recipe's epochs
        args.start_step = max(1, min(TuneConfig.start_step, recipe.epochs // 2))
    tune = schema.from_namespace(TuneConfig, args)
    try:
        check_search(tune, recipe.epochs)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    cadence = trial_recipe(recipe, tune).validate_every
    if cadence != recipe.validate_every:
        print(
            f"the trials score val every {cadence} epochs (the recipe: every "
            f"{recipe.validate_every}), so that the median rule can stop one from its score "
            f"{tune.start_step} on"
        )
    if args.output:
        _write_experiment(args, arguments, tune, recipe, space, placement_from(args, chosen))
    else:
        _search_here(args, arguments, tune, recipe, space)


def _write_experiment(
    args: argparse.Namespace,
    arguments: dict[str, Any],
    tune: TuneConfig,
    recipe: TrainConfig,
    space: tuple[Dimension, ...],
    placement: Placement,
) -> None:
    from components.tuning.experiment import ExperimentTarget, build_experiment, to_manifest
    from components.tuning.staging import staging_job

    tracking_uri, user, _ = split_credentials(args.tracking_uri)
    target = ExperimentTarget(
        name=args.name,
        namespace=args.namespace,
        image=args.gpu_image if placement.on_gpu else args.cpu_image,
        tracking_uri=tracking_uri,
        placement=placement,
        shared_pvc=args.shared_pvc,
        parent_run_id=args.parent_run_id,
    )
    written = {args.output: to_manifest(build_experiment(tune, target, recipe, space))}
    if args.data_job:
        cpu_target = replace(target, image=args.cpu_image)
        written[args.data_job] = staging_job(cpu_target, arguments)
    for path in written:
        if (path.exists() or path.is_symlink()) and not args.force:
            raise SystemExit(
                f"{path} exists: give --force to replace it (the file itself, never what "
                "a link there points to), or another path"
            )
    if user is not None:
        print(
            f"the tracking URI's user and password stay out of the Experiment: its trials "
            f"read them from the secret {target.placement.mlflow_secret} "
            "(MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD)"
        )
    for path, manifest in written.items():
        with atomic_file(path, "w") as handle:  # replaces a link there, never its target
            handle.write(yaml.safe_dump(manifest, sort_keys=False))
    print(
        f"wrote {args.output}: {tune.trials} trials of {', '.join(d.name for d in space)} "
        f"({tune.algorithm}, medianstop) on {placement.hardware.upper()} nodes; the trials read "
        f"{target.folder}/arrays on claim {target.shared_pvc}."
    )
    print(_next_commands(args, target.name))


def _next_commands(args: argparse.Namespace, name: str) -> str:
    """What to run next: the data Job first, where one was written, then the Experiment."""
    namespace = f" -n {args.namespace}" if args.namespace else ""
    if not args.data_job:
        return (
            f"Its trials read {name}/arrays on the claim, which nothing here staged: give "
            "--data-job FILE (with --source, else the public archive) for a Job that stages "
            f"them, or copy a preprocess output there. Then: kubectl apply -f {args.output}"
        )
    return (
        f"wrote {args.data_job}: the Job {name}-data downloads and preprocesses the "
        "archive onto the claim. Then:\n"
        f"  kubectl apply -f {args.data_job}\n"
        f"  kubectl{namespace} wait --for=condition=complete job/{name}-data --timeout=2h\n"
        f"  kubectl apply -f {args.output}"
    )


def _search_here(
    args: argparse.Namespace,
    arguments: dict[str, Any],
    tune: TuneConfig,
    recipe: TrainConfig,
    space: tuple[Dimension, ...],
) -> None:
    first = tuple(_enqueued(text, space) for text in args.enqueue)  # before the heavy imports
    from pipeline.tune_here import search_and_register

    logging.getLogger("mlflow").setLevel(logging.WARNING)  # MLflow sets INFO as it loads
    name = f"tune-{time.strftime('%Y%m%d-%H%M%S')}"
    workdir = args.workdir.resolve() / name
    recipe = replace(recipe, output=str(workdir / "trials"))
    log_path = workdir / "search.log"
    print(f"searching on this machine; full log: {log_path}", flush=True)
    with logged_to_file(log_path, SHOWN):  # a line a trial and an epoch; the rest: the log
        print(search_and_register(arguments, tune, recipe, space, workdir, name, first))


def _enqueued(text: str, space: tuple[Dimension, ...]) -> dict[str, Any]:
    """``lr=0.004,batch_size=100`` as typed values of searched dimensions.

    Raises:
        SystemExit: a name that is not searched (fixed, or not a recipe field).
    """
    fields = {field.name: field for field in schema.fields_of(TrainConfig, RECIPE)}
    searched_names = [dimension.name for dimension in space]
    values = {}
    for pair in text.split(","):
        name, _, value = pair.partition("=")
        if name not in searched_names:
            raise SystemExit(
                f"expected NAME=VALUE of searched fields ({', '.join(searched_names)}) in "
                f"--enqueue, found {pair!r}"
            )
        values[name] = schema.convert(schema.field_type(TrainConfig, fields[name]), value, name)
        dimension = next(d for d in space if d.name == name)
        if not within(dimension, values[name]):
            where = dimension.choices or f"{dimension.low:g} to {dimension.high:g}"
            raise SystemExit(
                f"expected {name} in the searched space ({where}) in --enqueue, found {value!r}"
            )
    return values


def within(dimension: Dimension, value: object) -> bool:
    """Whether ``value`` is one the search could pick for ``dimension``."""
    if dimension.choices:
        return value in dimension.choices
    low, high = dimension.low, dimension.high
    return (
        isinstance(value, int | float)
        and low is not None
        and high is not None
        and (low <= value <= high)
    )
