"""Compile, run locally, or submit the pipeline.

python -m pipeline compile --output pipeline.yaml [--image IMG] [--gpu-image IMG] [--cpu 8 ...]
python -m pipeline run --local [--source URI] [name=value ...]
python -m pipeline submit --host URL [name=value ...]
python -m pipeline sweep --local lr=0.001,0.003 model=tutorial_cnn,bn_cnn [name=value ...]
"""

import argparse
import dataclasses
import inspect
import json
import logging
import tempfile
from pathlib import Path

import requests
import yaml
from kfp import compiler

from components.cluster.placement import Placement
from components.core import schema
from components.core.logs import setup_logging
from components.core.presets import PRESETS, pipeline_arguments
from components.training.config import TrainConfig
from pipeline.pipeline import PARAMETERS, STEP_SCHEMAS, build_pipeline
from pipeline.settings import CURRENT_BACKEND, ClusterSettings, PipelineOnly
from pipeline.sweep import SWEEPABLE, grid, split_pairs

log = logging.getLogger(__name__)
# on this machine a failed task fails the run at once (retries are for lost pods), and a
# sweep's children train one after another (they would only share the same cores)
LOCAL_SETTINGS = ClusterSettings(train_retries=0, sweep_parallelism=1)


def parse_arguments(pairs: list[str], pipeline, preset: str | None = None) -> dict:
    """``name=value`` pairs, each value converted to the type of the pipeline's parameter.

    A ``preset``'s values come first; explicit pairs override them. Every step's settings
    are then checked (``SystemExit`` with the step's own message).
    """
    arguments = pipeline_arguments(preset) if preset else {}
    arguments.update(typed_value(pair, pipeline) for pair in pairs)
    check_arguments(arguments, pipeline)
    return arguments


def typed_value(pair: str, pipeline) -> tuple[str, object]:
    """``name=value`` as the name and the value in its pipeline parameter's type."""
    parameters = inspect.signature(pipeline.pipeline_func).parameters
    name, sep, value = pair.partition("=")
    if not sep or name not in parameters:
        raise SystemExit(
            f"expected name=value with a name among: {', '.join(parameters)}; found {pair!r}"
        )
    try:
        return name, schema.convert(type(parameters[name].default), value, name)
    except ValueError as err:
        raise SystemExit(str(err)) from None


def check_arguments(arguments: dict, pipeline) -> None:
    """Build every step's settings from ``arguments`` (defaults for the rest, placeholders
    for what a step learns at run time): a bad value is refused now, not when its step
    runs, maybe hours into the run."""
    parameters = inspect.signature(pipeline.pipeline_func).parameters
    values = {name: arguments.get(name, parameters[name].default) for name in parameters}
    for step in (*STEP_SCHEMAS, PipelineOnly):
        settings = {}
        for field in dataclasses.fields(step):
            if field.name in values:
                settings[field.name] = values[field.name]
            elif field.default is dataclasses.MISSING:
                settings[field.name] = schema.field_type(step, field)()  # "" or 0.0
        try:
            step(**settings)
        except ValueError as err:
            raise SystemExit(f"refused before the run starts: {err}") from None


def compile_pipeline(output: Path, settings: ClusterSettings, sweep: bool = False) -> Path:
    """Compile the pipeline (or the sweep) for ``settings``, as its oldest KFP backend reads it."""
    for image in {settings.image, settings.gpu_image}:
        if "@sha256:" not in image:
            log.warning(
                "%s is a tag, not a digest: KFP's cache would reuse outputs of whatever image "
                "the tag named before; pin NAME@sha256:… (`make compile` does)",
                image,
            )
    compiler.Compiler().compile(build_pipeline(settings, sweep), str(output))
    if not settings.optional_secrets:
        drop_secret_optionality(output)
    return output


def drop_secret_optionality(spec: Path) -> None:
    """Remove ``SecretAsEnv.optional``, a field that KFP backends before 2.15 do not know.

    kfp-kubernetes writes it even when false, and an older driver refuses the whole
    task config over one unknown field.
    """
    pipeline_spec, platform = yaml.safe_load_all(spec.read_text())
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    for config in executors.values():
        for secret in config.get("secretAsEnv", []):
            secret.pop("optional", None)
    spec.write_text(yaml.safe_dump_all([pipeline_spec, platform], sort_keys=False))


def sweep_arguments(pairs: list[str], pipeline, preset: str | None = None) -> dict:
    """The pipeline arguments of a sweep: ``name=v1,v2`` pairs become the ``grid``."""
    fixed, axes = split_pairs(pairs)
    arguments = parse_arguments(fixed, pipeline, preset)
    parameters = inspect.signature(pipeline.pipeline_func).parameters
    arguments["grid"] = grid(
        {
            name: [typed_value(f"{name}={value}", pipeline)[1] for value in values]
            for name, values in axes.items()
        }
    )
    for combination in arguments["grid"]:  # refused now, not in a child an hour from now
        recipe = {name: arguments.get(name, parameters[name].default) for name in SWEEPABLE}
        try:
            TrainConfig(data="", output="", **{**recipe, **json.loads(combination)})
        except ValueError as err:
            raise SystemExit(f"a sweep combination {combination} is refused: {err}") from None
    return arguments


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    summaries = {
        "compile": "write the pipeline spec for a cluster (for `kfp run submit -f`)",
        "submit": "compile and start a run on a Kubeflow Pipelines API",
    }
    for name, summary in summaries.items():
        sub = _add_command(commands, name, summary)
        if name == "submit":
            _add_preset_flag(sub)
        sub.add_argument(
            "--sweep",
            action="store_true",
            help="the sweep pipeline: its grid parameter lists the combinations (with "
            "submit: name=v1,v2 pairs build it), the best child is registered",
        )
        sub.add_argument(
            "--image",
            default=ClusterSettings.image,
            help="CPU image for download, preprocess, evaluate (default: %(default)s)",
        )
        sub.add_argument(
            "--gpu-image",
            default=ClusterSettings.gpu_image,
            help="CUDA image for train (default: %(default)s)",
        )
        sub.add_argument(
            "--nodes",
            type=int,
            default=1,
            help="train across this many GPU nodes as a Kubeflow Trainer TrainJob "
            "(default: 1: the GPU train task, torchrun when gpus > 1)",
        )
        sub.add_argument(
            "--trainer-runtime",
            default=ClusterSettings.trainer_runtime,
            help="the ClusterTrainingRuntime a multi-node TrainJob uses (default: %(default)s)",
        )
        schema.add_arguments(sub.add_argument_group("where the train task runs"), Placement)
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
        "--experiment", default="dogs-vs-cats", help="KFP experiment (default: %(default)s)"
    )
    submit.add_argument("arguments", nargs="*", metavar="name=value")
    here = {
        "run": "run every step on this machine with kfp.local (no Docker, no cluster)",
        "sweep": "run a grid of training recipes on this machine, e.g. lr=0.001,0.003 "
        "model=tutorial_cnn,bn_cnn: one child MLflow run each, the best registered",
    }
    for name, summary in here.items():
        run = _add_command(commands, name, summary)
        run.add_argument(
            "--local",
            action="store_true",
            help="on this machine: the only place it runs, as in `kfp`'s own local runner",
        )
        run.add_argument("--source", default=None, help="shorthand for source=URI")
        run.add_argument(
            "--workdir",
            type=Path,
            default=Path("runs/local"),
            help="where outputs and the MLflow SQLite store go (default: %(default)s)",
        )
        run.add_argument(
            "--verbose",
            "-v",
            action="store_true",
            help="print everything kfp.local prints, not a line per task (the log has it all)",
        )
        run.add_argument("arguments", nargs="*", metavar="name=value")
        _add_preset_flag(run)
    return parser


def check_reachable(host: str, timeout: float = 10.0) -> None:
    """Exit with one line that says what was tried when the KFP API does not answer."""
    url = f"{host.rstrip('/')}/apis/v2beta1/healthz"
    try:
        requests.get(url, timeout=timeout)
    except requests.RequestException as err:
        raise SystemExit(
            f"cannot reach the Kubeflow Pipelines API at {host} ({type(err).__name__} on "
            f"{url}); check --host, e.g. after `kubectl -n kubeflow port-forward "
            "svc/ml-pipeline-ui 8080:80` use --host http://localhost:8080"
        ) from None


def _add_command(commands, name: str, summary: str) -> argparse.ArgumentParser:
    """A subcommand whose help ends with the pipeline's parameters and their defaults."""
    return commands.add_parser(
        name,
        help=summary,
        description=summary,
        epilog=_parameters_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _parameters_epilog() -> str:
    """The pipeline's parameters and their defaults, for ``--help``."""
    lines = ["pipeline parameters (name=value):"]
    for name, (kind, default) in PARAMETERS.items():
        lines.append(f"  {f'{name}={default!r}':<38} {kind.__name__}")
    return "\n".join(lines)


def _add_preset_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=None,
        help="named settings (tutorial: fast, grey 50×50; accurate: RGB "
        "128×128 ResNet-18); name=value pairs override them",
    )


def run_here(args: argparse.Namespace) -> None:
    """The whole pipeline on this machine; a line per task, then where everything is."""
    setup_logging("INFO" if args.verbose else "WARNING")
    from pipeline.local import LocalRunError, run_local  # mlflow: loaded only to run

    if not args.verbose:  # MLflow sets its own logger to INFO when imported
        logging.getLogger("mlflow").setLevel(logging.WARNING)

    sweep = args.command == "sweep"
    pipeline = build_pipeline(LOCAL_SETTINGS, sweep)
    parse = sweep_arguments if sweep else parse_arguments
    arguments = parse(args.arguments, pipeline, args.preset)
    if args.source:
        arguments["source"] = args.source
    try:
        print(run_local(pipeline, arguments, args.workdir, verbose=args.verbose))
    except LocalRunError as err:
        raise SystemExit(str(err)) from None


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.command in ("run", "sweep"):
        run_here(args)
        return
    setup_logging()
    settings = ClusterSettings(
        image=args.image,
        gpu_image=args.gpu_image,
        nodes=args.nodes,
        trainer_runtime=args.trainer_runtime,
        training=schema.from_namespace(Placement, args),
        kfp_backend=args.kfp_backend,
    )
    if args.command == "compile":
        log.info("wrote %s", compile_pipeline(args.output, settings, args.sweep))
        return
    import kfp

    parse = sweep_arguments if args.sweep else parse_arguments
    arguments = parse(args.arguments, build_pipeline(settings, args.sweep), args.preset)
    with tempfile.TemporaryDirectory() as scratch:
        package = compile_pipeline(Path(scratch) / "pipeline.yaml", settings, args.sweep)
        check_reachable(args.host)
        run = kfp.Client(host=args.host).create_run_from_pipeline_package(
            str(package), arguments=arguments, experiment_name=args.experiment
        )
    print(f"submitted run {run.run_id}")


if __name__ == "__main__":
    main()
