"""Glue the training components share: a pipeline run's training config."""

from typing import Any

from components.core.schema import decode, pick
from components.tracking import kfp_tracking
from components.training.config import TrainConfig
from components.tuning.grid import SWEEPABLE, combination_key


def pipeline_train_config(
    *,
    arrays: str,
    output: str,
    recipe: dict[str, Any],
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    combination: str = "",
    mlflow_run_id: str | None = None,
) -> TrainConfig:
    """Training as the pipeline runs it: always ready to resume this KFP run's checkpoint.

    Args:
        arrays: the preprocess output.
        output: the train task's model directory.
        recipe: the task's inputs by name; the ``TrainConfig`` pipeline fields among them
            are taken.
        checkpoint_root: durable checkpoint prefix; empty: the MLflow run's artifacts.
        kfp_run_id: this pipeline run.
        pipeline_name: the pipeline's name.
        combination: in a sweep, this child's recipe fields as a JSON object, over
            ``recipe``.
        mlflow_run_id: the run to train in: KFP's run for the task, where KFP's MLflow
            integration made one; else the training makes its own.
    """
    key = f"{kfp_run_id}/{combination_key(combination)}" if combination else kfp_run_id
    checkpoint_uri = f"{checkpoint_root.rstrip('/')}/{key}" if checkpoint_root else None
    swept = decode(TrainConfig, combination, SWEEPABLE) if combination else {}
    experiment = kfp_tracking.pipeline_experiment(recipe["experiment"])  # KFP's, where it tracks
    return TrainConfig(
        data=arrays,
        output=output,
        resume=True,
        checkpoint_uri=checkpoint_uri,
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
        combination=combination or None,
        mlflow_run_id=mlflow_run_id,
        **{**pick(TrainConfig, recipe), **swept, "experiment": experiment},
    )
