"""The command line of ``python -m pipeline``: its commands, flags and help."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from components.recipes.presets import DEFAULTS_SAID
from components.recipes.recipe import Recipe, presets_table
from pipeline.parameters import DESCRIPTIONS, parameters_of
from pipeline.road import add_placement_flags
from pipeline.submit import DEFAULT_EXPERIMENT, SERVICE_ACCOUNT, TOKEN_ENV
from pipeline.target import CLUSTER_ONLY, CURRENT_BACKEND, LOCAL_TRACKING, ClusterTarget
from pipeline.tune import add_tune_command

PROG = "python -m pipeline"
CLUSTER_COMMANDS = ("compile", "submit")  # their recipe without --preset: CLUSTER_PRESET
CLUSTER_USAGE = {
    "compile": "[--preset NAME|FILE.yaml] [--output FILE] [options]",
    "submit": "--host URL [--preset NAME|FILE.yaml] [options] [name=value ...]",
}


def build_parser(description: str, here: Recipe, cluster: Recipe) -> argparse.ArgumentParser:
    """The command line; ``--help`` shows the values each command will use: ``cluster``'s
    for compile and submit, ``here``'s for the rest."""
    parser = argparse.ArgumentParser(prog=PROG, description=description)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    summaries = {
        "compile": "write the pipeline spec for a cluster (for `kfp run submit -f`); runs nothing",
        "submit": "compile and start a run on a cluster's Kubeflow Pipelines API: it runs "
        "there, not here",
    }
    for name, summary in summaries.items():
        sub = _add_command(commands, name, summary, cluster)
        _add_preset_flag(sub)
        sub.add_argument(
            "--sweep",
            action="store_true",
            help="the sweep pipeline: its grid parameter lists the combinations (with "
            "submit: name=v1,v2 pairs build it), the best child is registered",
        )
        sub.add_argument(
            "--tune",
            action="store_true",
            help="the search pipeline: the cluster's Katib searches the recipe (the search's "
            "settings are parameters: trials=, algorithm=, ...), the best trial is registered",
        )
        sub.add_argument(
            "--image",
            default=ClusterTarget.image,
            help="CPU image for download, preprocess, evaluate, and train on a CPU preset "
            "(default: %(default)s)",
        )
        sub.add_argument(
            "--gpu-image",
            default=ClusterTarget.gpu_image,
            help="CUDA image for train on a GPU preset (default: %(default)s)",
        )
        sub.add_argument(
            "--nodes",
            type=int,
            default=1,
            help="train across this many nodes as a Kubeflow Trainer TrainJob "
            "(default: 1: the train task, torchrun when gpus > 1)",
        )
        sub.add_argument(
            "--preprocess-pods",
            type=int,
            default=1,
            help="decode the photos over this many pods, each a slice of the shards, "
            "joined after (default: 1: one preprocess task)",
        )
        sub.add_argument(
            "--trainer-runtime",
            default=ClusterTarget.trainer_runtime,
            help="the ClusterTrainingRuntime a multi-node TrainJob uses (default: %(default)s)",
        )
        add_placement_flags(sub, cluster)
        sub.add_argument(
            "--kfp-backend",
            default=CURRENT_BACKEND,
            help="oldest Kubeflow Pipelines backend the spec must run on, 2.5 or later; "
            "before 2.15 the secrets must exist (default: %(default)s)",
        )
    commands.choices["compile"].add_argument(
        "--output",
        "-o",
        type=Path,
        default=Path("pipeline.yaml"),
        help="pipeline spec to write (default: %(default)s)",
    )
    submit = commands.choices["submit"]
    submit.add_argument("--host", required=True, help="Kubeflow Pipelines API endpoint")
    submit.add_argument(
        "--namespace",
        help="the profile's namespace to run in (a multi-user Kubeflow needs it)",
    )
    submit.add_argument(
        "--token",
        help=f"a bearer token for the API (better: ${TOKEN_ENV}, which `ps` does not show; "
        "default: that, else the in-cluster service-account token where there is one)",
    )
    submit.add_argument(
        "--experiment",
        default=DEFAULT_EXPERIMENT,
        help="an existing KFP experiment (default: %(default)s, created on first use)",
    )
    submit.add_argument("--run-name", help="the run's name in the KFP UI (default: KFP's)")
    submit.add_argument(
        "--service-account",
        default=SERVICE_ACCOUNT,
        help="what the run's pods run as (default: %(default)s, from manifests/pipeline or "
        "overlays/profile; '' for the namespace's default)",
    )
    submit.add_argument(
        "--timeout-seconds",
        type=float,
        default=120.0,
        help="how long the whole submission may take, every request included "
        "(default: %(default)s)",
    )
    submit.add_argument("arguments", nargs="*", metavar="name=value")
    local_commands = {
        "run": "run every step on this machine with kfp.local (--local: no Docker, no "
        "cluster); on a cluster: submit",
        "sweep": "run a grid of training recipes on this machine (--local), e.g. "
        "lr=0.001,0.003 model=tutorial_cnn,bn_cnn: one child MLflow run each, the best "
        "registered; on a cluster: submit --sweep",
    }
    for name, summary in local_commands.items():
        run = _add_command(commands, name, summary, here)
        run.add_argument(
            "--local",
            action="store_true",
            help="run on this machine with kfp's local runner, as tune --local searches here "
            "(to run on a cluster: submit)",
        )
        run.add_argument("--source", default=None, help="shorthand for source=URI")
        run.add_argument(
            "--workdir",
            type=Path,
            default=Path("runs/local"),
            help="where the tasks' outputs and logs go (default: %(default)s); MLflow logs "
            "to $MLFLOW_TRACKING_URI, else to runs/mlflow.db",
        )
        run.add_argument(
            "--verbose",
            "-v",
            action="store_true",
            help="print everything kfp.local prints, not a line per task (the log has it all)",
        )
        run.add_argument("arguments", nargs="*", metavar="name=value")
        _add_preset_flag(run)
    _add_preset_flag(add_tune_command(commands, here))
    return parser


def _add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    recipe: Recipe,
) -> argparse.ArgumentParser:
    """A subcommand whose help ends with the pipeline's parameters and the defaults it
    will use: ``recipe``'s values, and a local run's own where it has them."""
    return commands.add_parser(
        name,
        help=summary,
        description=summary,
        # compile's and submit's flags would fill a screen: a refusal stays a few lines
        usage=f"%(prog)s {CLUSTER_USAGE[name]}" if name in CLUSTER_USAGE else None,
        epilog=_parameters_epilog(name, recipe),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _parameters_epilog(command: str, recipe: Recipe) -> str:
    """The pipeline's parameters and their defaults, for ``--help``: what the command
    takes as name=value, or, for compile, what the spec asks for when a run starts; the
    defaults are ``recipe``'s where it has the setting (what the compiled spec holds), and
    a run here shows its own tracking store and none of the cluster's settings."""
    here = command not in CLUSTER_COMMANDS
    heading = (
        "the spec's parameters (compile takes none: give them when a run starts, e.g. "
        "kfp run submit -f pipeline.yaml epochs=10):"
        if command == "compile"
        else "pipeline parameters (name=value):"
    )
    heading += f"\n  (defaults: {recipe.name}'s; --preset NAME gives another's)"
    lines = [heading]
    for name, (kind, default) in parameters_of(
        recipe=recipe, on_gpu=recipe.placement().on_gpu
    ).items():
        if here and name in CLUSTER_ONLY:
            continue
        shown = LOCAL_TRACKING if here and name == "tracking_uri" else repr(default)
        lines.append(f"  {name}={shown} ({kind.__name__})")
        lines += textwrap.wrap(
            DESCRIPTIONS[name], width=88, initial_indent=" " * 6, subsequent_indent=" " * 6
        )
    return "\n".join(lines)


def _add_preset_flag(parser: argparse.ArgumentParser) -> None:
    """``--preset``: read before the command line is (``preset_in``), listed here for
    help, the presets a line each at the top of the epilog."""
    parser.add_argument(
        "--preset",
        metavar="NAME|FILE.yaml",
        help="named settings or a recipe file of settings by name (preset: NAME, then "
        f"settings), checked as they are; name=value pairs override them ({DEFAULTS_SAID}). "
        "The recipe's values are the parameters' defaults and its hardware places the train "
        "task. The presets are listed below; docs/reference.md compares them",
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    after = f"\n\n{parser.epilog}" if parser.epilog else ""
    parser.epilog = f"presets:\n{presets_table()}{after}"
