"""``tune --local``: download and preprocess once, search, then evaluate and gate the best.

The steps run in this process one after another, as the pipeline would run them: the
best trial's model is scored on the test split and goes through the same gate as a
pipeline run's or a sweep's best child.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from components.core import schema
from components.downloading.config import DownloadConfig
from components.downloading.fetch import download
from components.evaluation.config import EvaluateConfig
from components.evaluation.report import evaluate
from components.preprocessing.build import build_arrays
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate
from components.tracking import run_log, store
from components.tracking.tags import PARENT_TAG
from components.tracking.ui import run_url, ui_address
from components.training.config import TrainConfig
from components.tuning import local
from components.tuning.config import TuneConfig
from components.tuning.search_space import Dimension
from pipeline.next_steps import closing_lines


def search_and_register(
    arguments: dict[str, Any],
    tune: TuneConfig,
    recipe: TrainConfig,
    space: tuple[Dimension, ...],
    workdir: Path,
    name: str,
    first: tuple[dict[str, Any], ...] = (),
) -> str:
    """The whole search on this machine; a summary of what it found and where."""
    raw, arrays = workdir / "raw", workdir / "arrays"
    download(DownloadConfig(output=str(raw), **schema.pick(DownloadConfig, arguments)))
    build_arrays(
        PreprocessConfig(
            input=str(raw), output=str(arrays), **schema.pick(PreprocessConfig, arguments)
        )
    )
    recipe = replace(recipe, data=str(arrays))
    best, _ = local.search(tune, recipe, space, name, first)
    model_dir = Path(recipe.output) / best.name
    report = evaluate(
        EvaluateConfig(
            model_dir=str(model_dir),
            data=str(arrays),
            output=str(workdir / "evaluation"),
            experiment=recipe.experiment,
            mlflow_run_id=best.run_id,
        )
    )
    accuracy = report["metrics"]["accuracy"]
    decision = register_if_accurate(
        RegisterConfig(
            mlflow_run_id=best.run_id,
            test_accuracy=accuracy,
            data=str(arrays),  # to score the alias's holder on the same test photos
            **schema.pick(RegisterConfig, arguments),
        )
    )
    ui = ui_address(store.tracking_uri())
    experiment_id = run_log.experiment_of(best.run_id)
    return "\n".join(
        [
            f"best trial:    {best.name}, run {best.run_id} (test accuracy {accuracy:.4f})",
            f"registration:  {decision.reason}",
            f"search run:    {run_log.run_tag(best.run_id, PARENT_TAG)} (the trials "
            f"nest under it) at {store.tracking_uri()}",
            f"best run:      {run_url(ui, experiment_id, best.run_id)}",
            f"compare:       {best.compare_url}",
            f"outputs:       {workdir}",
            *closing_lines(decision.reason, accuracy, store.tracking_uri(), arguments),
        ]
    )
