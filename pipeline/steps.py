"""Glue the components share: a pipeline run's training config."""

from components.train import TrainConfig


def pipeline_train_config(
    arrays: str,
    output: str,
    model_name: str,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    schedule: str,
    seed: int,
    experiment: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
) -> TrainConfig:
    """Training as the pipeline runs it: always ready to resume this KFP run's checkpoint."""
    checkpoint_uri = f"{checkpoint_root.rstrip('/')}/{kfp_run_id}" if checkpoint_root else None
    return TrainConfig(
        data=arrays,
        output=output,
        model=model_name,
        epochs=epochs,
        batch_size=batch_size,
        lr=lr,
        weight_decay=weight_decay,
        schedule=schedule,
        seed=seed,
        resume=True,
        experiment=experiment,
        checkpoint_uri=checkpoint_uri,
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
    )
