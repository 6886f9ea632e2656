"""Lightweight KFP components: typed interfaces, each a few lines that call ``components``.

The bodies run inside our images (kfp and this project already installed), or in this
Python under ``kfp.local.SubprocessRunner``; they import what they need themselves, as
KFP requires. ``pipeline.pipeline`` sets each task's image at compile time. (No
``from __future__ import annotations`` here: KFP reads the annotations as types.)
"""

from typing import NamedTuple

from kfp import dsl
from kfp.dsl import (
    Artifact,
    ClassificationMetrics,
    Dataset,
    Input,
    Markdown,
    Metrics,
    Model,
    Output,
)

from pipeline.settings import IMAGE

component = dsl.component(base_image=IMAGE, install_kfp_package=False)


@component
def download_op(source: str, sha256: str, dataset: Output[Dataset]):
    """Fetch and extract the PetImages archive (``sha256`` empty: not checked, only recorded)."""
    from pathlib import Path

    from components.download import fetch

    record = fetch(source, Path(dataset.path), sha256=sha256 or None)
    dataset.metadata.update(sha256=record.sha256, file_count=record.file_count)


@component
def preprocess_op(
    raw: Input[Dataset],
    image_size: int,
    channels: int,
    val_fraction: float,
    test_fraction: float,
    seed: int,
    arrays: Output[Dataset],
):
    """Decode, de-duplicate and split the images into uint8 arrays plus meta.json."""
    from pathlib import Path

    from components.preprocess import PreprocessConfig, build_arrays

    cfg = PreprocessConfig(image_size, channels, val_fraction, test_fraction, seed)
    meta = build_arrays(Path(raw.path), Path(arrays.path), cfg)
    arrays.metadata.update(kept=meta["kept"], skipped=len(meta["skipped"]))


@component
def train_op(
    arrays: Input[Dataset],
    model_name: str,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    schedule: str,
    seed: int,
    tracking_uri: str,
    experiment: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: Output[Model],
) -> str:
    """Train, resuming from this KFP run's last checkpoint after a retry; the MLflow run id."""
    from components.tracking import use_tracking_uri
    from components.train import TrainConfig, train

    use_tracking_uri(tracking_uri)
    checkpoint_uri = f"{checkpoint_root.rstrip('/')}/{kfp_run_id}" if checkpoint_root else None
    result = train(
        TrainConfig(
            data=arrays.path,
            output=model.path,
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
    )
    model.metadata["mlflow_run_id"] = result.run_id
    return result.run_id


@component
def evaluate_op(
    arrays: Input[Dataset],
    model: Input[Model],
    mlflow_run_id: str,
    tracking_uri: str,
    experiment: str,
    evaluation: Output[Artifact],
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    report: Output[Markdown],
) -> float:
    """Score the test split: KFP metrics, confusion matrix, ROC curve, a report; the accuracy."""
    from components.evaluate import evaluate
    from components.tracking import use_tracking_uri
    from pipeline.reports import publish_evaluation

    use_tracking_uri(tracking_uri)
    result = evaluate(
        model.path, arrays.path, evaluation.path, mlflow_run_id=mlflow_run_id, experiment=experiment
    )
    publish_evaluation(result, evaluation.path, mlflow_run_id, metrics, classification, report)
    return result["metrics"]["accuracy"]


@component
def register_op(
    mlflow_run_id: str,
    test_accuracy: float,
    min_accuracy: float,
    registered_model_name: str,
    tracking_uri: str,
) -> NamedTuple("GateOutputs", registered=bool, reason=str):
    """The quality gate: register the model as ``candidate`` only if it is accurate enough."""
    from components.register import register_if_accurate
    from components.tracking import use_tracking_uri

    use_tracking_uri(tracking_uri)
    decision = register_if_accurate(
        mlflow_run_id, test_accuracy, min_accuracy, registered_model_name
    )
    return (decision.registered, decision.reason)
