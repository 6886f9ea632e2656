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
    """Fetch and extract the PetImages archive.

    Args:
        source: https://, s3://, file:// or a path.
        sha256: the archive's expected digest; empty: not checked, only recorded.
        dataset: where the archive is extracted.
    """
    from pathlib import Path

    from components.download import fetch

    record = fetch(source, Path(dataset.path), sha256=sha256 or None)
    dataset.metadata.update(sha256=record.sha256, file_count=record.file_count)


@component
def preprocess_op(raw: Input[Dataset], settings: str, arrays: Output[Dataset]):
    """Decode, de-duplicate and split the images into uint8 arrays plus meta.json.

    Args:
        raw: the download step's extracted archive.
        settings: the preprocess recipe as JSON (``pipeline.pipeline.settings_for``).
        arrays: where the arrays and meta.json are written.
    """
    from pathlib import Path

    from components.core.schema import decode
    from components.preprocess import PreprocessConfig, build_arrays

    cfg = PreprocessConfig(**decode(PreprocessConfig, settings))
    meta = build_arrays(Path(raw.path), Path(arrays.path), cfg)
    arrays.metadata.update(kept=meta["kept"], skipped=len(meta["skipped"]))


@component
def train_op(
    arrays: Input[Dataset],
    settings: str,
    gpus: int,
    tracking_uri: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: Output[Model],
    combination: str = "",
) -> str:
    """Train on this node (torchrun, one process per GPU, when gpus > 1).

    A retried task resumes from this KFP run's last checkpoint.

    Args:
        arrays: the preprocess step's output.
        settings: the train recipe and settings as JSON.
        gpus: processes to start, one per GPU.
        tracking_uri: the MLflow tracking server.
        checkpoint_root: durable checkpoint prefix; empty: the MLflow run's artifacts.
        kfp_run_id: this pipeline run, which the MLflow run is tagged with.
        pipeline_name: tagged on the MLflow run too.
        model: where model.pt, the checkpoint and the history are written.
        combination: in a sweep, this child's recipe settings as JSON, over ``settings``;
            the run is nested under the sweep's parent run of the same KFP run.

    Returns:
        The MLflow run id.
    """
    from components.core.tracking import use_tracking_uri
    from components.training.session import train_processes
    from pipeline.steps import pipeline_train_config

    use_tracking_uri(tracking_uri)
    cfg = pipeline_train_config(
        arrays=arrays.path,
        output=model.path,
        settings=settings,
        checkpoint_root=checkpoint_root,
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
        combination=combination,
    )
    run_id = train_processes(cfg, gpus)
    model.metadata["mlflow_run_id"] = run_id
    return run_id


@component
def trainjob_op(
    arrays: Input[Dataset],
    settings: str,
    nodes: int,
    gpus: int,
    gpu_image: str,
    runtime: str,
    shared_pvc: str,
    placement: str,
    tracking_uri: str,
    checkpoint_root: str,
    kfp_run_id: str,
    pipeline_name: str,
    model: Output[Model],
) -> str:
    """Train across ``nodes`` nodes as a Kubeflow Trainer TrainJob.

    Args:
        arrays: the preprocess step's output, copied to the shared volume.
        settings: the train recipe and settings as JSON.
        nodes: nodes to train on.
        gpus: GPUs (and processes) per node.
        gpu_image: the CUDA image the job's pods run.
        runtime: the ClusterTrainingRuntime the TrainJob refers to.
        shared_pvc: the ReadWriteMany claim the pods and this task share.
        placement: where the pods run, as ``Placement.to_json()``.
        tracking_uri: the MLflow tracking server.
        checkpoint_root: durable checkpoint prefix; empty: the MLflow run's artifacts.
        kfp_run_id: this pipeline run.
        pipeline_name: tagged on the MLflow run.
        model: where the trained model is copied back to.

    Returns:
        The MLflow run id.
    """
    from components.cluster import trainjob
    from components.cluster.placement import Placement
    from pipeline.steps import pipeline_train_config

    cfg = pipeline_train_config(
        arrays=arrays.path,
        output=model.path,
        settings=settings,
        checkpoint_root=checkpoint_root,
        kfp_run_id=kfp_run_id,
        pipeline_name=pipeline_name,
    )
    job = trainjob.ClusterJob(
        name=trainjob.trainjob_name(kfp_run_id),
        namespace=trainjob.current_namespace(),
        image=gpu_image,
        nodes=nodes,
        gpus_per_node=gpus,
        tracking_uri=tracking_uri,
        shared_pvc=shared_pvc,
        runtime=runtime,
        placement=Placement.from_json(placement),
    )
    run_id = trainjob.train_on_cluster(cfg, job, trainjob.in_cluster_client())
    model.metadata["mlflow_run_id"] = run_id
    return run_id


@component
def evaluate_op(
    arrays: Input[Dataset],
    model: Input[Model],
    mlflow_run_id: str,
    tracking_uri: str,
    settings: str,
    evaluation: Output[Artifact],
    metrics: Output[Metrics],
    classification: Output[ClassificationMetrics],
    report: Output[Markdown],
) -> NamedTuple("EvaluateOutputs", accuracy=float, mlflow_run_id=str):  # type: ignore[valid-type]
    """Score the test split: KFP metrics, confusion matrix, ROC curve, a report.

    Args:
        arrays: the preprocess step's output.
        model: the train step's output.
        mlflow_run_id: the training run the test metrics are logged into.
        tracking_uri: the MLflow tracking server.
        settings: the evaluate settings as JSON.
        evaluation: metrics.json, roc.json and the PNGs.
        metrics: scalar metrics for the KFP UI.
        classification: confusion matrix and ROC curve for the KFP UI.
        report: a Markdown summary for the KFP UI.

    Returns:
        The test accuracy and, passed through, the MLflow run id.
    """
    from dataclasses import replace

    from components.core.schema import decode
    from components.core.tracking import use_tracking_uri
    from components.evaluation.config import EvaluateConfig
    from components.evaluation.report import evaluate
    from pipeline.reports import publish_evaluation

    use_tracking_uri(tracking_uri)
    cfg = replace(EvaluateConfig(**decode(EvaluateConfig, settings)), mlflow_run_id=mlflow_run_id)
    result = evaluate(model.path, arrays.path, evaluation.path, cfg)
    publish_evaluation(result, evaluation.path, mlflow_run_id, metrics, classification, report)
    return (result["metrics"]["accuracy"], mlflow_run_id)


@component
def register_op(
    mlflow_run_id: str, test_accuracy: float, tracking_uri: str, settings: str
) -> NamedTuple("GateOutputs", registered=bool, reason=str):  # type: ignore[valid-type]
    """The quality gate: register the model as ``candidate`` only if it is accurate enough.

    Args:
        mlflow_run_id: the training run whose model is judged.
        test_accuracy: its test accuracy.
        tracking_uri: the MLflow tracking server.
        settings: the gate's settings (minimum accuracy, registry name) as JSON.

    Returns:
        Whether the model was registered, and why.
    """
    from components.core.schema import decode
    from components.core.tracking import use_tracking_uri
    from components.register import RegisterConfig, register_if_accurate

    use_tracking_uri(tracking_uri)
    cfg = RegisterConfig(
        mlflow_run_id=mlflow_run_id,
        test_accuracy=test_accuracy,
        **decode(RegisterConfig, settings),
    )
    decision = register_if_accurate(cfg)
    return (decision.registered, decision.reason)


@component
def sweep_parent_op(
    grid: list, experiment: str, tracking_uri: str, kfp_run_id: str, pipeline_name: str
) -> str:
    """Open the sweep's parent MLflow run, which the children are nested under.

    Args:
        grid: the combinations, each a JSON object of recipe settings.
        experiment: the MLflow experiment.
        tracking_uri: the MLflow tracking server.
        kfp_run_id: this pipeline run, tagged on the parent.
        pipeline_name: tagged on the parent too.

    Returns:
        The parent run's id.
    """
    from components.core.tracking import use_tracking_uri
    from pipeline.sweep_runs import start_parent

    use_tracking_uri(tracking_uri)
    return start_parent(experiment, grid, kfp_run_id, pipeline_name)


@component
def sweep_best_op(parent_run_id: str, child_run_ids: list, tracking_uri: str) -> NamedTuple(  # type: ignore[valid-type]
    "BestOutputs", mlflow_run_id=str, val_accuracy=float, test_accuracy=float, compare_url=str
):
    """Mark the child with the best validation accuracy and end the parent run.

    Args:
        parent_run_id: the sweep's parent MLflow run.
        child_run_ids: every child's MLflow run.
        tracking_uri: the MLflow tracking server.

    Returns:
        The best child's run id and accuracies, and the MLflow UI's compare view of all.
    """
    from components.core.tracking import use_tracking_uri
    from pipeline.sweep_runs import mark_best

    use_tracking_uri(tracking_uri)
    return tuple(mark_best(parent_run_id, child_run_ids))
