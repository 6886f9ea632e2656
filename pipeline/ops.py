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
    gpus: int,
    tracking_uri: str,
    experiment: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: Output[Model],
) -> str:
    """Train on this node (torchrun, one process per GPU, when gpus > 1); the MLflow run id.

    A retried task resumes from this KFP run's last checkpoint.
    """
    from components.launch import train_processes
    from components.tracking import use_tracking_uri
    from pipeline.steps import pipeline_train_config

    use_tracking_uri(tracking_uri)
    cfg = pipeline_train_config(
        arrays.path,
        model.path,
        model_name,
        epochs,
        batch_size,
        lr,
        weight_decay,
        schedule,
        seed,
        experiment,
        checkpoint_root,
        kfp_run_id,
        pipeline_name,
    )
    run_id = train_processes(cfg, gpus)
    model.metadata["mlflow_run_id"] = run_id
    return run_id


@component
def pytorchjob_op(
    arrays: Input[Dataset],
    model_name: str,
    epochs: int,
    batch_size: int,
    lr: float,
    weight_decay: float,
    schedule: str,
    seed: int,
    nodes: int,
    gpus: int,
    gpu_image: str,
    shared_pvc: str,
    tracking_uri: str,
    experiment: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: Output[Model],
) -> str:
    """Train across ``nodes`` nodes as a Training Operator PyTorchJob; the MLflow run id."""
    from components.pytorchjob import ClusterJob, current_namespace, train_on_cluster
    from pipeline.steps import pipeline_train_config

    cfg = pipeline_train_config(
        arrays.path,
        model.path,
        model_name,
        epochs,
        batch_size,
        lr,
        weight_decay,
        schedule,
        seed,
        experiment,
        checkpoint_root,
        kfp_run_id,
        pipeline_name,
    )
    job = ClusterJob(
        name=f"dogs-vs-cats-{kfp_run_id}"[:63],
        namespace=current_namespace(),
        image=gpu_image,
        nodes=nodes,
        gpus_per_node=gpus,
        tracking_uri=tracking_uri,
        shared_pvc=shared_pvc,
    )
    run_id = train_on_cluster(cfg, job)
    model.metadata["mlflow_run_id"] = run_id
    return run_id


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
) -> NamedTuple("EvaluateOutputs", accuracy=float, mlflow_run_id=str):  # type: ignore[valid-type]
    """Score the test split: KFP metrics, confusion matrix, ROC curve, a report.

    Returns the test accuracy and, passed through, the MLflow run id.
    """
    from components.evaluate import evaluate
    from components.tracking import use_tracking_uri
    from pipeline.reports import publish_evaluation

    use_tracking_uri(tracking_uri)
    result = evaluate(
        model.path, arrays.path, evaluation.path, mlflow_run_id=mlflow_run_id, experiment=experiment
    )
    publish_evaluation(result, evaluation.path, mlflow_run_id, metrics, classification, report)
    return (result["metrics"]["accuracy"], mlflow_run_id)


@component
def register_op(
    mlflow_run_id: str,
    test_accuracy: float,
    min_accuracy: float,
    registered_model_name: str,
    tracking_uri: str,
) -> NamedTuple("GateOutputs", registered=bool, reason=str):  # type: ignore[valid-type]
    """The quality gate: register the model as ``candidate`` only if it is accurate enough."""
    from components.register import register_if_accurate
    from components.tracking import use_tracking_uri

    use_tracking_uri(tracking_uri)
    decision = register_if_accurate(
        mlflow_run_id, test_accuracy, min_accuracy, registered_model_name
    )
    return (decision.registered, decision.reason)
