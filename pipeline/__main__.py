"""Compile, run locally, or submit the pipeline.

python -m pipeline compile --output pipeline.yaml [--image IMG] [--gpu-image IMG] [--cpu 8 ...]
python -m pipeline run --local [--source URI] [name=value ...]
python -m pipeline submit --host URL [name=value ...]
"""

import argparse
import inspect
import logging
import tempfile
from pathlib import Path

import yaml
from kfp import compiler

from components.cluster.placement import Placement
from components.core import schema
from components.core.logs import setup_logging
from components.core.presets import PRESETS, pipeline_arguments
from pipeline.local import run_local
from pipeline.pipeline import build_pipeline
from pipeline.settings import CURRENT_BACKEND, ClusterSettings

log = logging.getLogger(__name__)


def parse_arguments(pairs: list[str], pipeline, preset: str | None = None) -> dict:
    """``name=value`` pairs, each value converted to the type of the pipeline's parameter.

    A ``preset``'s values come first; explicit pairs override them.
    """
    parameters = inspect.signature(pipeline.pipeline_func).parameters
    arguments = pipeline_arguments(preset) if preset else {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or name not in parameters:
            raise SystemExit(
                f"expected name=value with a name among: {', '.join(parameters)}; found {pair!r}"
            )
        kind = type(parameters[name].default)
        arguments[name] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
    return arguments


def compile_pipeline(output: Path, settings: ClusterSettings) -> Path:
    """Compile the pipeline for ``settings``, in the form its oldest KFP backend reads."""
    compiler.Compiler().compile(build_pipeline(settings), str(output))
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("compile", "submit"):
        sub = commands.add_parser(name)
        if name == "submit":
            _add_preset_flag(sub)
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
            help="train across this many GPU nodes as a Training Operator PyTorchJob "
            "(default: 1: the GPU train task, torchrun when gpus > 1)",
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
    run = commands.add_parser("run")
    run.add_argument(
        "--local",
        action="store_true",
        required=True,
        help="run every step on this machine with kfp.local (no Docker, no cluster)",
    )
    run.add_argument("--source", default=None, help="shorthand for source=URI")
    run.add_argument(
        "--workdir",
        type=Path,
        default=Path("runs/local"),
        help="where outputs and the MLflow SQLite store go (default: %(default)s)",
    )
    run.add_argument("arguments", nargs="*", metavar="name=value")
    _add_preset_flag(run)
    return parser


def _add_preset_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        choices=list(PRESETS),
        default=None,
        help="named settings (tutorial: fast, grey 50×50; accurate: RGB "
        "128×128 ResNet-18); name=value pairs override them",
    )


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    setup_logging()
    if args.command == "run":
        pipeline = build_pipeline()
        arguments = parse_arguments(args.arguments, pipeline, args.preset)
        if args.source:
            arguments["source"] = args.source
        print(run_local(pipeline, arguments, args.workdir))
        return
    settings = ClusterSettings(
        image=args.image,
        gpu_image=args.gpu_image,
        nodes=args.nodes,
        training=schema.from_namespace(Placement, args),
        kfp_backend=args.kfp_backend,
    )
    if args.command == "compile":
        log.info("wrote %s", compile_pipeline(args.output, settings))
        return
    import kfp

    arguments = parse_arguments(args.arguments, build_pipeline(settings), args.preset)
    with tempfile.TemporaryDirectory() as scratch:
        package = compile_pipeline(Path(scratch) / "pipeline.yaml", settings)
        run = kfp.Client(host=args.host).create_run_from_pipeline_package(
            str(package), arguments=arguments, experiment_name=args.experiment
        )
    print(f"submitted run {run.run_id}")


if __name__ == "__main__":
    main()
