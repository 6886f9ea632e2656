"""The pipeline's parameters: the step schemas' pipeline fields, by name.

No kfp import here: ``name=value`` pairs are checked against these before anything heavy
loads; ``pipeline.pipeline`` builds each pipeline function's signature and docstring from
them.
"""

from typing import Any

from components.core import schema
from components.core.schema import PIPELINE_ROLES
from components.deploying.config import DeployConfig
from components.downloading.config import DownloadConfig
from components.evaluation.config import EvaluateConfig
from components.preprocessing.config import PreprocessConfig
from components.recipes.recipe import Recipe
from components.registration.config import RegisterConfig
from components.training.config import TrainConfig
from components.tuning.config import TuneConfig
from pipeline.target import PipelineOnly

STEP_SCHEMAS = (
    DownloadConfig,
    PreprocessConfig,
    TrainConfig,
    EvaluateConfig,
    RegisterConfig,
    DeployConfig,
)
# {name: (type, default)}: every parameter of the pipeline, from the schemas
PARAMETERS = schema.signature_parameters((*STEP_SCHEMAS, PipelineOnly), *PIPELINE_ROLES)
# the search's settings: pipeline parameters of the tune variant only
TUNE_PARAMETERS = schema.signature_parameters((TuneConfig,), *PIPELINE_ROLES)
# what the KFP UI shows beside each parameter when a run is launched from it: the pipeline
# functions' docstrings say the same (tests/pipeline/test_parameters.py)
DESCRIPTIONS = {
    **schema.descriptions((*STEP_SCHEMAS, PipelineOnly, TuneConfig), *PIPELINE_ROLES),
    "grid": "the combinations to train: a list of JSON strings, each an object of recipe "
    """settings, e.g. ['{"lr": 0.001}', '{"lr": 0.003}'] (`python -m pipeline submit """
    "--sweep lr=0.001,0.003` builds it); an empty list is refused before anything runs",
}


def recipe_arguments(recipe: Recipe | None) -> dict[str, Any]:
    """What ``recipe`` gives the pipeline: its values, and its name for the MLflow run."""
    return {"recipe_name": recipe.label, **recipe.values} if recipe else {}


def parameters_of(
    sweep: bool = False, tune: bool = False, recipe: Recipe | None = None, on_gpu: bool = True
) -> dict[str, tuple[type, Any]]:
    """The parameters of the pipeline, the sweep (``grid`` added) or the search (the
    search's settings added); with ``recipe``, its values are their defaults; ``gpus``
    only where the train task runs ``on_gpu``."""
    parameters = dict(PARAMETERS)
    if not on_gpu:
        del parameters["gpus"]
    if sweep:
        parameters["grid"] = (list, [])
    if tune:
        parameters.update(TUNE_PARAMETERS)
    for name, value in recipe_arguments(recipe).items():
        if name in parameters:  # the rest place the train task (compiled into the spec)
            parameters[name] = (parameters[name][0], value)
    return parameters
