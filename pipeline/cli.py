"""The command line of ``python -m pipeline``: its commands, flags and help."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

from components.recipes.presets import PRESETS
from components.recipes.recipe import recipe_name, recipe_values
from pipeline.parameters import DESCRIPTIONS, parameters_of
from pipeline.road import BASELINE, add_placement_flags
from pipeline.submit import DEFAULT_EXPERIMENT, SERVICE_ACCOUNT, TOKEN_ENV
from pipeline.target import CLUSTER_PRESET, CURRENT_BACKEND, ClusterTarget
from pipeline.tune import add_tune_command


def build_parser(description: str, argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The command line; ``--help`` shows the values of the preset ``argv`` names."""
    named = _named_preset(argv)
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=description)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    summaries = {
        "compile": "write the pipeline spec for a cluster (for `kfp run submit -f`); runs nothing",
        "submit": "compile and start a run on a cluster's Kubeflow Pipelines API: it runs "
        "there, not here",
    }
    for name, summary in summaries.items():
        sub = _add_command(commands, name, summary, preset=named or CLUSTER_PRESET)
        _add_preset_flag(sub, default=CLUSTER_PRESET)
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
            "--trainer-runtime",
            default=ClusterTarget.trainer_runtime,
            help="the ClusterTrainingRuntime a multi-node TrainJob uses (default: %(default)s)",
        )
        add_placement_flags(sub, named or CLUSTER_PRESET)
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
    here = {
        "run": "run every step on this machine with kfp.local (--local: no Docker, no "
        "cluster); on a cluster: submit",
        "sweep": "run a grid of training recipes on this machine (--local), e.g. "
        "lr=0.001,0.003 model=tutorial_cnn,bn_cnn: one child MLflow run each, the best "
        "registered; on a cluster: submit --sweep",
    }
    for name, summary in here.items():
        run = _add_command(commands, name, summary, preset=named)
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
    add_tune_command(commands, named)
    return parser


def _add_command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    summary: str,
    preset: str | None = None,
) -> argparse.ArgumentParser:
    """A subcommand whose help ends with the pipeline's parameters and their defaults:
    ``preset``'s values where the command takes them without ``--preset``."""
    return commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=_parameters_epilog(name, preset),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _parameters_epilog(command: str, preset: str | None) -> str:
    """The pipeline's parameters and their defaults, for ``--help``: what the command
    takes as name=value, or, for compile, what the spec asks for when a run starts; the
    defaults are ``preset``'s where it has the setting (what the compiled spec holds)."""
    heading = (
        "the spec's parameters (compile takes none: give them when a run starts, e.g. "
        "kfp run submit -f pipeline.yaml epochs=10):"
        if command == "compile"
        else "pipeline parameters (name=value):"
    )
    if preset:
        heading += f"\n  (defaults: the {preset} preset's; --preset NAME gives another's)"
    lines = [heading]
    for name, (kind, default) in parameters_of(preset=preset).items():
        lines.append(f"  {name}={default!r} ({kind.__name__})")
        lines += textwrap.wrap(
            DESCRIPTIONS[name], width=88, initial_indent=" " * 6, subsequent_indent=" " * 6
        )
    return "\n".join(lines)


def _named_preset(argv: list[str] | None) -> str | None:
    """The preset (or recipe file) ``--preset`` names in ``argv``, where it is one."""
    words = list(argv or [])
    for index, word in enumerate(words):
        value = word.partition("=")[2] if word.startswith("--preset=") else None
        if word == "--preset" and index + 1 < len(words):
            value = words[index + 1]
        if value:
            try:
                recipe_values(value)
            except ValueError:
                return None  # argparse says why, when it parses --preset
            return value
    return None


def _add_preset_flag(parser: argparse.ArgumentParser, default: str | None = None) -> None:
    on_cluster = (
        f" (default: {default}, the one made for the GPU node; its values are the compiled "
        "spec's defaults, and its hardware places the train task)"
        if default
        else f" (default: {BASELINE}, the schemas' defaults)"
    )
    parser.add_argument(
        "--preset",
        type=recipe_name,
        default=default,
        metavar="NAME|FILE.yaml",
        help=f"named settings ({', '.join(PRESETS)}: docs/reference.md compares them), or a "
        f"recipe file of settings by name, checked as they are{on_cluster}; name=value pairs "
        "override them",
    )
