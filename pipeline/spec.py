"""Writing the pipeline spec that a cluster's KFP backend reads."""

import logging
from pathlib import Path

import yaml
from kfp import compiler

from components.recipes.recipe import Recipe
from pipeline.pipeline import build_pipeline
from pipeline.target import ClusterTarget

log = logging.getLogger(__name__)


def compile_pipeline(
    output: Path,
    target: ClusterTarget,
    sweep: bool = False,
    tune: bool = False,
    recipe: Recipe | None = None,
) -> Path:
    """Compile the pipeline (or the sweep, or the search) for ``target``, as its oldest KFP
    backend reads it, with ``recipe``'s values as its parameters' defaults."""
    for image in {target.image, target.train_image}:
        if "@sha256:" not in image:
            log.warning(
                "%s is a tag, not a digest: KFP's cache would reuse outputs of whatever image "
                "the tag named before; pin NAME@sha256:… (`make compile` does)",
                image,
            )
    compiler.Compiler().compile(build_pipeline(target, sweep, tune, recipe), str(output))
    if not target.optional_secrets:
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
