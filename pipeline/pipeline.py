"""The pipeline: download -> preprocess -> train (GPU) -> evaluate -> quality gate.

Wiring, resources and Kubernetes settings only; the work is in ``components``. The
pipeline's parameters are not written out here: they are the step schemas' recipe and
setting fields (see ``components.core.schema``), so a step's flag and the pipeline
parameter of the same name share one default by construction.
"""

import inspect
from typing import NamedTuple

from kfp import dsl, kubernetes

from components.cluster.placement import GPU, MLFLOW_KEYS, S3_KEYS
from components.core import schema
from components.core.schema import RECIPE, SETTING
from components.download import DownloadConfig
from components.evaluation.config import EvaluateConfig
from components.preprocess import PreprocessConfig
from components.register import RegisterConfig
from components.training.config import TrainConfig
from pipeline import ops
from pipeline.settings import ClusterSettings, PipelineOnly

PIPELINE_NAME = "dogs-vs-cats"
STEP_SCHEMAS = (DownloadConfig, PreprocessConfig, TrainConfig, EvaluateConfig, RegisterConfig)
# {name: (type, default)}: every parameter of the pipeline, from the schemas
PARAMETERS = schema.signature_parameters((*STEP_SCHEMAS, PipelineOnly), RECIPE, SETTING)
S3_ENV = {key: key for key in S3_KEYS}
MLFLOW_ENV = {key: key for key in MLFLOW_KEYS}
TRAIN_RETRY_WINDOW = f"{7 * 24 * 3600}s"  # a week: longer than any training run


class PipelineOutputs(NamedTuple):
    """What a finished run hands back: where to look in MLflow, and how it went."""

    mlflow_run_id: str
    test_accuracy: float
    gate: str


class SweepOutputs(NamedTuple):
    """What a finished sweep hands back: the parent run, the best child, the compare view."""

    parent_run_id: str
    best_run_id: str
    best_val_accuracy: float
    test_accuracy: float
    compare_url: str
    gate: str


def settings_for(step: type, parameters: dict) -> str:
    """The pipeline parameters that ``step``'s schema declares, as one JSON string.

    Each value is a pipeline channel, which KFP writes into the string as a placeholder
    and every KFP v2 backend fills in at run time (placeholders inside dict constants
    are resolved only by recent backends; inside strings, by all).
    """
    names = [field.name for field in schema.fields_of(step, RECIPE, SETTING)]
    return "{" + ", ".join(f'"{name}": "{parameters[name]}"' for name in names) + "}"


def build_pipeline(settings: ClusterSettings | None = None, sweep: bool = False):
    """The ``@dsl.pipeline`` function for ``settings``: compile it, or call it under kfp.local.

    With ``sweep``, the pipeline takes one more parameter, ``grid`` (a list of JSON
    objects of recipe settings), and trains and evaluates each combination as a child
    MLflow run under one parent; the best by validation accuracy goes through the gate.
    """
    settings = settings or ClusterSettings()
    if sweep and settings.nodes > 1:
        raise ValueError("expected a sweep on one node per combination, found --nodes > 1")
    parameters = {**PARAMETERS, "grid": (list, [])} if sweep else PARAMETERS

    def dogs_vs_cats(*values):
        named = dict(zip(parameters, values, strict=True))
        return _wire_sweep(named, settings) if sweep else _wire(named, settings)

    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    dogs_vs_cats.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(name, keyword, default=default, annotation=kind)
            for name, (kind, default) in parameters.items()
        ],
        return_annotation=SweepOutputs if sweep else PipelineOutputs,
    )
    name = f"{PIPELINE_NAME}-sweep" if sweep else PIPELINE_NAME
    description = (
        "Train a grid of Dogs-vs-Cats recipes as child MLflow runs; register the best."
        if sweep
        else "Train, evaluate and register a Dogs-vs-Cats classifier."
    )
    return dsl.pipeline(name=name, description=description)(dogs_vs_cats)


def _wire(p: dict, settings: ClusterSettings) -> PipelineOutputs:
    placement = settings.training
    arrays = _data_tasks(p, settings)
    training = _training_inputs(p, arrays)
    if settings.nodes > 1:  # compiled for several nodes: a Kubeflow Trainer TrainJob trains
        train = ops.trainjob_op(
            nodes=settings.nodes,
            gpus=p["gpus"],
            gpu_image=settings.gpu_image,
            runtime=settings.trainer_runtime,
            shared_pvc=settings.shared_pvc,
            placement=placement.to_json(),
            **training,
        )
        _cpu_task(train, settings, cpu="1", memory="4Gi").set_caching_options(False)
        _retry_training(train, settings)
        kubernetes.mount_pvc(train, pvc_name=settings.shared_pvc, mount_path="/shared")
        _with_mlflow_secret(train, settings)
    else:
        train = ops.train_op(gpus=p["gpus"], **training)
        _gpu_task(train, settings, p["gpus"])
    evaluate = _evaluate_task(p, arrays, train, settings)
    gate = _gate_task(p, train.outputs["Output"], evaluate.outputs["accuracy"], settings)
    return PipelineOutputs(
        mlflow_run_id=evaluate.outputs["mlflow_run_id"],
        test_accuracy=evaluate.outputs["accuracy"],
        gate=gate.outputs["reason"],
    )


def _wire_sweep(p: dict, settings: ClusterSettings) -> SweepOutputs:
    arrays = _data_tasks(p, settings)
    parent = ops.sweep_parent_op(
        grid=p["grid"],
        experiment=p["experiment"],
        tracking_uri=p["tracking_uri"],
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
    )
    _cpu_task(parent, settings, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(parent, settings)
    with dsl.ParallelFor(p["grid"], parallelism=settings.sweep_parallelism) as combination:
        # the child finds its parent run by the KFP run they share: kfp.local hands a
        # ParallelFor body the loop item in place of an outer task's output parameter
        train = ops.train_op(
            gpus=p["gpus"], combination=combination, **_training_inputs(p, arrays)
        ).after(parent)
        _gpu_task(train, settings, p["gpus"])
        evaluate = _evaluate_task(p, arrays, train, settings)
    best = ops.sweep_best_op(
        parent_run_id=parent.output,
        child_run_ids=dsl.Collected(evaluate.outputs["mlflow_run_id"]),
        tracking_uri=p["tracking_uri"],
    )
    _cpu_task(best, settings, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(best, settings)
    gate = _gate_task(p, best.outputs["mlflow_run_id"], best.outputs["test_accuracy"], settings)
    return SweepOutputs(
        parent_run_id=parent.output,
        best_run_id=best.outputs["mlflow_run_id"],
        best_val_accuracy=best.outputs["val_accuracy"],
        test_accuracy=best.outputs["test_accuracy"],
        compare_url=best.outputs["compare_url"],
        gate=gate.outputs["reason"],
    )


def _data_tasks(p: dict, settings: ClusterSettings):
    """Download and preprocess; the arrays."""
    download = ops.download_op(source=p["source"], sha256=p["sha256"])
    _cpu_task(download, settings, cpu="1", memory="2Gi")
    # no KFP retry: the step retries transient errors itself, within its deadline, and a
    # refused archive or a digest mismatch would only fail again
    _with_secret(download, settings.training.s3_secret, S3_ENV, settings)
    preprocess = ops.preprocess_op(
        raw=download.outputs["dataset"], settings=settings_for(PreprocessConfig, p)
    )
    _cpu_task(preprocess, settings, cpu="2", memory="4Gi")
    return preprocess.outputs["arrays"]


def _training_inputs(p: dict, arrays) -> dict:
    return dict(
        arrays=arrays,
        settings=settings_for(TrainConfig, p),
        tracking_uri=p["tracking_uri"],
        checkpoint_root=p["checkpoint_root"],
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
    )


def _evaluate_task(p: dict, arrays, train, settings: ClusterSettings):
    evaluate = ops.evaluate_op(
        arrays=arrays,
        model=train.outputs["model"],
        mlflow_run_id=train.outputs["Output"],
        tracking_uri=p["tracking_uri"],
        settings=settings_for(EvaluateConfig, p),
    )
    _cpu_task(evaluate, settings, cpu="2", memory="8Gi").set_caching_options(False)
    _with_mlflow_secret(evaluate, settings)
    return evaluate


def _gate_task(p: dict, run_id, test_accuracy, settings: ClusterSettings):
    gate = ops.register_op(
        mlflow_run_id=run_id,
        test_accuracy=test_accuracy,
        tracking_uri=p["tracking_uri"],
        settings=settings_for(RegisterConfig, p),
    )
    _cpu_task(gate, settings, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(gate, settings)
    return gate


def _cpu_task(task, settings: ClusterSettings, cpu: str, memory: str):
    """CPU image; requests as given, limits twice that."""
    task.set_container_image(settings.image)
    limit_cpu = f"{int(cpu[:-1]) * 2}m" if cpu.endswith("m") else str(int(cpu) * 2)
    limit_memory = f"{int(memory[:-2]) * 2}Gi"
    return (
        task.set_cpu_request(cpu)
        .set_cpu_limit(limit_cpu)
        .set_memory_request(memory)
        .set_memory_limit(limit_memory)
    )


def _retry_training(task, settings: ClusterSettings) -> None:
    """Retries of a training task (or of the TrainJob launcher): training resumes."""
    # Argo counts the retry window from the first attempt's start and cuts a retried pod
    # at its end; KFP's default of an hour would leave multi-hour training unretried
    task.set_retry(
        num_retries=settings.train_retries,
        backoff_duration="60s",
        backoff_factor=2,
        backoff_max_duration=TRAIN_RETRY_WINDOW,
    )


def _gpu_task(task, settings: ClusterSettings, gpus) -> None:
    """CUDA image placed as ``settings.training`` says: GPUs, toleration, shm, retries."""
    placement = settings.training
    task.set_container_image(settings.gpu_image)
    task.set_cpu_request(placement.cpu).set_cpu_limit(placement.cpu_limit)
    task.set_memory_request(placement.memory).set_memory_limit(placement.memory)
    task.set_accelerator_type(GPU).set_accelerator_limit(gpus)
    _retry_training(task, settings)
    task.set_caching_options(False)
    if placement.toleration_key:
        kubernetes.add_toleration(
            task, key=placement.toleration_key, operator="Exists", effect="NoSchedule"
        )
    if placement.node_label:
        kubernetes.add_node_selector(task, *placement.node_label)
    kubernetes.empty_dir_mount(
        task,
        volume_name="dshm",
        mount_path="/dev/shm",
        medium="Memory",
        size_limit=placement.shm_size,
    )
    _with_secret(task, placement.s3_secret, S3_ENV, settings)
    _with_mlflow_secret(task, settings)


def _with_mlflow_secret(task, settings: ClusterSettings) -> None:
    _with_secret(task, settings.training.mlflow_secret, MLFLOW_ENV, settings)


def _with_secret(task, secret: str, env: dict[str, str], settings: ClusterSettings) -> None:
    """The secret's keys as env: optional where the backend allows, else it must exist."""
    if settings.optional_secrets:
        kubernetes.use_secret_as_env(task, secret, env, optional=True)
    else:
        kubernetes.use_secret_as_env(task, secret, env)
