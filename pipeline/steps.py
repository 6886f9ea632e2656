"""Glue the training components share: a pipeline run's training config."""

from components.core.schema import decode
from components.training.config import TrainConfig
from pipeline.sweep import combination_key


def pipeline_train_config(
    *,
    arrays: str,
    output: str,
    settings: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    combination: str = "",
) -> TrainConfig:
    """Training as the pipeline runs it: always ready to resume this KFP run's checkpoint.

    Args:
        arrays: the preprocess output.
        output: the train task's model directory.
        settings: the recipe and settings as JSON (``pipeline.pipeline.settings_for``).
        checkpoint_root: durable checkpoint prefix; empty: the MLflow run's artifacts.
        kfp_run_id: this pipeline run.
        pipeline_name: the pipeline's name.
        combination: in a sweep, this child's recipe settings as JSON, over ``settings``.
    """
    key = f"{kfp_run_id}/{combination_key(combination)}" if combination else kfp_run_id
    checkpoint_uri = f"{checkpoint_root.rstrip('/')}/{key}" if checkpoint_root else None
    return TrainConfig(
        data=arrays,
        output=output,
        resume=True,
        checkpoint_uri=checkpoint_uri,
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
        combination=combination or None,
        **{**decode(TrainConfig, settings), **decode(TrainConfig, combination or "{}")},
    )
