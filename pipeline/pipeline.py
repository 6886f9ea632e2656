"""The pipeline: download -> preprocess -> train (GPU) -> evaluate -> register.

Wiring, resources and Kubernetes configuration only; the work is in ``components``. The
pipeline's parameters are not written out here: they are the step schemas' pipeline
fields (see ``components.core.schema``), so a step's flag and the pipeline parameter of
the same name share one default by construction. The wiring reads them as typed schema
objects (``Parameters``) and hands each task its fields one input each.
"""

import inspect
from dataclasses import dataclass
from typing import Any, NamedTuple

from kfp import dsl, kubernetes

from components.cluster.placement import GPU, MLFLOW_KEYS, S3_KEYS
from components.cluster.quantities import twice_cpu, twice_memory
from components.core.schema import pipeline_values, unchecked
from components.deploying.config import DeployConfig
from components.downloading.config import DownloadConfig
from components.evaluation.config import EvaluateConfig
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from components.training.config import TrainConfig
from components.tuning.config import TuneConfig
from pipeline import ops
from pipeline.parameters import DESCRIPTIONS, parameters_of
from pipeline.target import ClusterTarget, PipelineOnly

PIPELINE_NAME = "dogs-vs-cats"
S3_ENV = {key: key for key in S3_KEYS}
MLFLOW_ENV = {key: key for key in MLFLOW_KEYS}
TRAIN_RETRY_WINDOW = f"{7 * 24 * 3600}s"  # a week: longer than any training run


class PipelineOutputs(NamedTuple):
    """What a finished run hands back: where to look in MLflow, and how it went."""

    mlflow_run_id: str
    test_accuracy: float
    registration: str
    serving_url: str


class TuneOutputs(NamedTuple):
    """What a finished search hands back: the best trial's run, how it tested, the gate."""

    best_run_id: str
    test_accuracy: float
    registration: str
    serving_url: str


class SweepOutputs(NamedTuple):
    """What a finished sweep hands back: the parent run, the best child, the compare view."""

    parent_run_id: str
    best_run_id: str
    best_val_accuracy: float
    test_accuracy: float
    compare_url: str
    registration: str
    serving_url: str


@dataclass(frozen=True)
class Parameters:
    """The pipeline's parameters as the wiring reads them: one typed object per schema.

    Each holds KFP channels in place of values (see ``schema.unchecked``); a task gets
    a schema's fields with ``pipeline_values``, each as an input of its own.
    """

    download: DownloadConfig
    preprocess: PreprocessConfig
    train: TrainConfig
    evaluate: EvaluateConfig
    register: RegisterConfig
    deploy: DeployConfig
    pipeline: PipelineOnly

    @classmethod
    def of(cls, values: dict[str, Any]) -> "Parameters":
        """The typed view of the pipeline function's arguments, by name."""
        return cls(
            download=unchecked(DownloadConfig, values),
            preprocess=unchecked(PreprocessConfig, values),
            train=unchecked(TrainConfig, values),
            evaluate=unchecked(EvaluateConfig, values),
            register=unchecked(RegisterConfig, values),
            deploy=unchecked(DeployConfig, values),
            pipeline=unchecked(PipelineOnly, values),
        )


def build_pipeline(target: ClusterTarget | None = None, sweep: bool = False, tune: bool = False):
    """The ``@dsl.pipeline`` function for ``target``: compile it, or call it under kfp.local.

    With ``sweep``, the pipeline takes one more parameter, ``grid`` (a list of JSON
    objects of recipe fields), and trains and evaluates each combination as a child
    MLflow run under one parent; the best by validation accuracy is sent to registration.
    With ``tune``, the cluster's Katib searches the recipe (``TuneConfig``'s parameters
    added) and the best trial's model is evaluated and sent to registration.
    """
    target = target or ClusterTarget()
    if (sweep or tune) and target.nodes > 1:
        raise ValueError("expected a sweep or search on one node per trial, found --nodes > 1")
    if sweep and tune:
        raise ValueError("expected a sweep or a search, found both")
    parameters = parameters_of(sweep, tune)

    def dogs_vs_cats(*values):
        named = dict(zip(parameters, values, strict=True))
        if sweep:
            return _wire_sweep(Parameters.of(named), named["grid"], target)
        if tune:
            return _wire_tune(Parameters.of(named), unchecked(TuneConfig, named), target)
        return _wire(Parameters.of(named), target)

    keyword = inspect.Parameter.POSITIONAL_OR_KEYWORD
    dogs_vs_cats.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(name, keyword, default=default, annotation=kind)
            for name, (kind, default) in parameters.items()
        ],
        return_annotation=SweepOutputs if sweep else TuneOutputs if tune else PipelineOutputs,
    )
    name, description = PIPELINE_NAME, "Train, evaluate and register a Dogs-vs-Cats classifier."
    if sweep:
        name = f"{PIPELINE_NAME}-sweep"
        description = (
            "Train a grid of Dogs-vs-Cats recipes as child MLflow runs; register the best."
        )
    if tune:
        name = f"{PIPELINE_NAME}-tune"
        description = "Search the Dogs-vs-Cats recipe with Katib; evaluate and register the best."
    # kfp reads each parameter's description from the function's docstring
    dogs_vs_cats.__doc__ = "\n".join(
        [description, "", "Args:", *(f"    {n}: {DESCRIPTIONS[n]}" for n in parameters)]
    )
    return dsl.pipeline(name=name, description=description)(dogs_vs_cats)


def _wire(p: Parameters, target: ClusterTarget) -> PipelineOutputs:
    arrays = _data_tasks(p, target, _preflight_task(p, target))
    training = _training_inputs(p, arrays)
    if target.nodes > 1:  # compiled for several nodes: a Kubeflow Trainer TrainJob trains
        train = ops.trainjob_op(
            nodes=target.nodes,
            gpus=p.pipeline.gpus,
            gpu_image=target.gpu_image,
            runtime=target.trainer_runtime,
            shared_pvc=target.shared_pvc,
            placement=target.training.to_json(),
            **training,
        )
        _cpu_task(train, target, cpu="1", memory="4Gi").set_caching_options(False)
        _retry_training(train, target)
        kubernetes.mount_pvc(train, pvc_name=target.shared_pvc, mount_path="/shared")
        _with_mlflow_secret(train, target)
    else:
        train = ops.train_op(gpus=p.pipeline.gpus, **training)
        _gpu_task(train, target, p.pipeline.gpus)
    evaluate = _evaluate_task(p, arrays, train, target)
    register = _register_task(p, train.outputs["Output"], evaluate.outputs["accuracy"], target)
    deploy = _deploy_task(p, register, train.outputs["Output"], target)
    return PipelineOutputs(
        mlflow_run_id=evaluate.outputs["mlflow_run_id"],
        test_accuracy=evaluate.outputs["accuracy"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def _wire_sweep(p: Parameters, grid, target: ClusterTarget) -> SweepOutputs:
    preflight = _preflight_task(p, target, grid)
    arrays = _data_tasks(p, target, preflight)
    parent = ops.sweep_parent_op(
        grid=grid,
        experiment=p.train.experiment,
        tracking_uri=p.pipeline.tracking_uri,
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
    ).after(preflight)
    _cpu_task(parent, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(parent, target)
    with dsl.ParallelFor(grid, parallelism=target.sweep_parallelism) as combination:
        # the child finds its parent run by the KFP run they share: kfp.local hands a
        # ParallelFor body the loop item in place of an outer task's output parameter
        train = ops.train_op(
            gpus=p.pipeline.gpus, combination=combination, **_training_inputs(p, arrays)
        ).after(parent)
        _gpu_task(train, target, p.pipeline.gpus)
        evaluate = _evaluate_task(p, arrays, train, target, combination)
    best = ops.sweep_best_op(
        parent_run_id=parent.output,
        child_run_ids=dsl.Collected(evaluate.outputs["mlflow_run_id"]),
        tracking_uri=p.pipeline.tracking_uri,
    )
    _cpu_task(best, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(best, target)
    register = _register_task(
        p, best.outputs["mlflow_run_id"], best.outputs["test_accuracy"], target
    )
    deploy = _deploy_task(p, register, best.outputs["mlflow_run_id"], target)
    return SweepOutputs(
        parent_run_id=parent.output,
        best_run_id=best.outputs["mlflow_run_id"],
        best_val_accuracy=best.outputs["val_accuracy"],
        test_accuracy=best.outputs["test_accuracy"],
        compare_url=best.outputs["compare_url"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def _wire_tune(p: Parameters, search: TuneConfig, target: ClusterTarget) -> TuneOutputs:
    arrays = _data_tasks(p, target, _preflight_task(p, target))
    training = _training_inputs(p, arrays)
    del training["checkpoint_root"]  # each trial checkpoints into its own MLflow run
    tune = ops.tune_op(
        gpu_image=target.gpu_image,
        shared_pvc=target.shared_pvc,
        placement=target.training.to_json(),
        **training,
        **pipeline_values(search),
    )
    # it only waits on Katib: small, and retried like training (an attempt finds the
    # Experiment of the one before and waits for it)
    _cpu_task(tune, target, cpu="500m", memory="2Gi").set_caching_options(False)
    _retry_training(tune, target)
    kubernetes.mount_pvc(tune, pvc_name=target.shared_pvc, mount_path="/shared")
    _with_mlflow_secret(tune, target)
    evaluate = _evaluate_task(p, arrays, tune, target)
    register = _register_task(p, tune.outputs["Output"], evaluate.outputs["accuracy"], target)
    deploy = _deploy_task(p, register, tune.outputs["Output"], target)
    return TuneOutputs(
        best_run_id=evaluate.outputs["mlflow_run_id"],
        test_accuracy=evaluate.outputs["accuracy"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def _preflight_task(p: Parameters, target: ClusterTarget, grid=None):
    """Check the tracking server (and a sweep's grid) before anything is downloaded."""
    sweep = {} if grid is None else {"grid": grid}
    preflight = ops.preflight_op(tracking_uri=p.pipeline.tracking_uri, **sweep)
    _cpu_task(preflight, target, cpu="250m", memory="512Mi").set_caching_options(False)
    _with_mlflow_secret(preflight, target)
    return preflight


def _data_tasks(p: Parameters, target: ClusterTarget, preflight):
    """Download and preprocess, once ``preflight`` passed; the arrays."""
    download = ops.download_op(**pipeline_values(p.download)).after(preflight)
    _cpu_task(download, target, cpu="1", memory="2Gi")
    # no KFP retry: the step retries transient errors itself, within its deadline, and a
    # refused archive or a digest mismatch would only fail again
    _with_secret(download, target.training.s3_secret, S3_ENV, target)
    preprocess = ops.preprocess_op(raw=download.outputs["dataset"], **pipeline_values(p.preprocess))
    _cpu_task(preprocess, target, cpu="2", memory="4Gi")
    return preprocess.outputs["arrays"]


def _training_inputs(p: Parameters, arrays) -> dict[str, Any]:
    return dict(
        arrays=arrays,
        tracking_uri=p.pipeline.tracking_uri,
        checkpoint_root=p.pipeline.checkpoint_root,
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
        **pipeline_values(p.train),
    )


def _evaluate_task(p: Parameters, arrays, train, target: ClusterTarget, combination=""):
    evaluate = ops.evaluate_op(
        arrays=arrays,
        model=train.outputs["trained_model"],
        mlflow_run_id=train.outputs["Output"],
        tracking_uri=p.pipeline.tracking_uri,
        combination=combination,
        **pipeline_values(p.evaluate),
    )
    _cpu_task(evaluate, target, cpu="2", memory="8Gi").set_caching_options(False)
    _with_mlflow_secret(evaluate, target)
    return evaluate


def _register_task(p: Parameters, run_id, test_accuracy, target: ClusterTarget):
    register = ops.register_op(
        mlflow_run_id=run_id,
        test_accuracy=test_accuracy,
        tracking_uri=p.pipeline.tracking_uri,
        **pipeline_values(p.register),
    )
    _cpu_task(register, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(register, target)
    return register


def _deploy_task(p: Parameters, register, run_id, target: ClusterTarget):
    """After the gate: serves the version it gave the alias when ``deploy`` is on; else it
    only says why not (a task either way, so the run's ``serving_url`` always has a value)."""
    deploy = ops.deploy_op(
        deploy=p.pipeline.deploy,
        took_alias=register.outputs["took_alias"],
        model_version=register.outputs["version"],
        mlflow_run_id=run_id,
        tracking_uri=p.pipeline.tracking_uri,
        image=target.image,
        **pipeline_values(p.deploy),
    )
    _cpu_task(deploy, target, cpu="250m", memory="512Mi").set_caching_options(False)
    _with_mlflow_secret(deploy, target)
    return deploy


def _cpu_task(task, target: ClusterTarget, cpu: str, memory: str):
    """CPU image; requests as given, limits twice that."""
    task.set_container_image(target.image)
    return (
        task.set_cpu_request(cpu)
        .set_cpu_limit(twice_cpu(cpu))
        .set_memory_request(memory)
        .set_memory_limit(twice_memory(memory))
    )


def _retry_training(task, target: ClusterTarget) -> None:
    """Retries of a training task (or of the TrainJob launcher): training resumes."""
    # Argo counts the retry window from the first attempt's start and cuts a retried pod
    # at its end; KFP's default of an hour would leave multi-hour training unretried
    task.set_retry(
        num_retries=target.train_retries,
        backoff_duration="60s",
        backoff_factor=2,
        backoff_max_duration=TRAIN_RETRY_WINDOW,
    )


def _gpu_task(task, target: ClusterTarget, gpus) -> None:
    """CUDA image placed as ``target.training`` says: GPUs, toleration, shm, retries."""
    placement = target.training
    task.set_container_image(target.gpu_image)
    task.set_cpu_request(placement.cpu).set_cpu_limit(placement.cpu_limit)
    task.set_memory_request(placement.memory).set_memory_limit(placement.memory)
    task.set_accelerator_type(GPU).set_accelerator_limit(gpus)
    _retry_training(task, target)
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
    _with_secret(task, placement.s3_secret, S3_ENV, target)
    _with_mlflow_secret(task, target)


def _with_mlflow_secret(task, target: ClusterTarget) -> None:
    _with_secret(task, target.training.mlflow_secret, MLFLOW_ENV, target)


def _with_secret(task, secret: str, env: dict[str, str], target: ClusterTarget) -> None:
    """The secret's keys as env: optional where the backend allows, else it must exist."""
    if target.optional_secrets:
        kubernetes.use_secret_as_env(task, secret, env, optional=True)
    else:
        kubernetes.use_secret_as_env(task, secret, env)
