"""The pipelines' wiring: which task runs after which, with what inputs, on which image,
with which resources, secrets, retries and GPUs. The pipeline functions in
``pipeline.pipeline`` hand it their values, which ``Settings`` sorts by step schema.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from kfp import dsl, kubernetes

from components.cluster.placement import MLFLOW_KEYS, S3_KEYS
from components.cluster.quantities import twice_cpu, twice_memory
from components.core.schema import pick
from components.deploying.config import DeployConfig
from components.downloading.config import DownloadConfig
from components.evaluation.config import EvaluateConfig
from components.preprocessing.config import PreprocessConfig
from components.registration.config import RegisterConfig
from components.training.config import TrainConfig
from components.tuning.config import TuneConfig
from pipeline import ops, train_ops
from pipeline.target import ClusterTarget, PipelineOnly

PIPELINE_NAME = "dogs-vs-cats"
S3_ENV = {key: key for key in S3_KEYS}
MLFLOW_ENV = {key: key for key in MLFLOW_KEYS}
TRAIN_RETRY_WINDOW = f"{7 * 24 * 3600}s"  # a week: longer than any training run


class Data(NamedTuple):
    """The data tasks' outputs: the arrays, and the download task's MLflow run that
    records the source listing."""

    arrays: Any
    listing: Any


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
class Settings:
    """A run's settings as the wiring hands them to the tasks: each step's pipeline fields
    by name (KFP channels while the pipeline is built), and the pipeline's own."""

    download: dict[str, Any]
    preprocess: dict[str, Any]
    train: dict[str, Any]
    evaluate: dict[str, Any]
    register: dict[str, Any]
    serving: dict[str, Any]  # the deploy task's
    gpus: Any
    tracking_uri: Any
    checkpoint_root: Any
    deploy: Any

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> "Settings":
        """A pipeline function's values (``{name: channel}``), each step's by its schema."""
        return cls(
            download=pick(DownloadConfig, values),
            preprocess=pick(PreprocessConfig, values),
            train=pick(TrainConfig, values),
            evaluate=pick(EvaluateConfig, values),
            register=pick(RegisterConfig, values),
            serving=pick(DeployConfig, values),
            **{"gpus": 1, **pick(PipelineOnly, values)},  # no gpus parameter: one process
        )

    @staticmethod
    def search_of(values: Mapping[str, Any]) -> dict[str, Any]:
        """The search's settings among a search pipeline function's values."""
        return pick(TuneConfig, values)


def wire(s: Settings, target: ClusterTarget) -> PipelineOutputs:
    data = _data_tasks(s, target, _preflight_task(s, target))
    training = _training_inputs(s, data.arrays)
    if target.nodes > 1:  # compiled for several nodes: a Kubeflow Trainer TrainJob trains
        train = train_ops.trainjob_op(
            nodes=target.nodes,
            gpus=_gpus(s, target),
            image=target.train_image,
            runtime=target.trainer_runtime,
            shared_pvc=target.shared_pvc,
            placement=target.training.to_json(),
            **training,
        )
        _launcher_task(train, target, cpu="1", memory="4Gi")
    else:
        train = train_ops.train_op(gpus=_gpus(s, target), **training)
        _train_task(train, target, s.gpus)
    evaluate, register, deploy = _after_training(s, data, train, target)
    return PipelineOutputs(
        mlflow_run_id=evaluate.outputs["mlflow_run_id"],
        test_accuracy=evaluate.outputs["accuracy"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def wire_sweep(s: Settings, grid: Any, target: ClusterTarget) -> SweepOutputs:
    preflight = _preflight_task(s, target, grid)
    data = _data_tasks(s, target, preflight)
    parent = ops.sweep_parent_op(
        grid=grid,
        experiment=s.train["experiment"],
        tracking_uri=s.tracking_uri,
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
    ).after(preflight)
    _cpu_task(parent, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(parent, target)
    with dsl.ParallelFor(grid, parallelism=target.sweep_parallelism) as combination:
        # the child finds its parent run by the KFP run they share: kfp.local hands a
        # ParallelFor body the loop item in place of an outer task's output parameter
        train = train_ops.train_op(
            gpus=_gpus(s, target), combination=combination, **_training_inputs(s, data.arrays)
        ).after(parent)
        _train_task(train, target, s.gpus)
        # the listing the training recorded: kfp.local hands the body the loop item in
        # place of the download task's output too
        evaluate = _evaluate_task(s, data._replace(listing=""), train, target, combination)
    best = ops.sweep_best_op(
        parent_run_id=parent.output,
        child_run_ids=dsl.Collected(evaluate.outputs["mlflow_run_id"]),
        tracking_uri=s.tracking_uri,
    )
    _cpu_task(best, target, cpu="500m", memory="1Gi").set_caching_options(False)
    _with_mlflow_secret(best, target)
    register = _register_task(
        s, data.arrays, best.outputs["mlflow_run_id"], best.outputs["test_accuracy"], target
    )
    deploy = _deploy_task(s, register, best.outputs["mlflow_run_id"], target)
    return SweepOutputs(
        parent_run_id=parent.output,
        best_run_id=best.outputs["mlflow_run_id"],
        best_val_accuracy=best.outputs["val_accuracy"],
        test_accuracy=best.outputs["test_accuracy"],
        compare_url=best.outputs["compare_url"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def wire_tune(s: Settings, search: dict[str, Any], target: ClusterTarget) -> TuneOutputs:
    data = _data_tasks(s, target, _preflight_task(s, target))
    training = _training_inputs(s, data.arrays)
    del training["checkpoint_root"]  # each trial checkpoints into its own MLflow run
    tune = train_ops.tune_op(
        image=target.train_image,
        shared_pvc=target.shared_pvc,
        placement=target.training.to_json(),
        **training,
        **search,
    )
    # it only waits on Katib: an attempt finds the Experiment of the one before
    _launcher_task(tune, target, cpu="500m", memory="2Gi")
    evaluate, register, deploy = _after_training(s, data, tune, target)
    return TuneOutputs(
        best_run_id=evaluate.outputs["mlflow_run_id"],
        test_accuracy=evaluate.outputs["accuracy"],
        registration=register.outputs["reason"],
        serving_url=deploy.outputs["url"],
    )


def _preflight_task(s: Settings, target: ClusterTarget, grid: Any = None) -> Any:
    """Check the tracking server (and a sweep's grid) before anything is downloaded."""
    sweep = {} if grid is None else {"grid": grid}
    preflight = ops.preflight_op(tracking_uri=s.tracking_uri, **sweep)
    _cpu_task(preflight, target, cpu="250m", memory="512Mi").set_caching_options(False)
    _with_mlflow_secret(preflight, target)
    return preflight


def _data_tasks(s: Settings, target: ClusterTarget, preflight: Any) -> Data:
    """Download and preprocess, once ``preflight`` passed; the arrays and the listing."""
    download = ops.download_op(tracking_uri=s.tracking_uri, **s.download).after(preflight)
    _cpu_task(download, target, cpu="1", memory="2Gi")
    # no KFP retry: the step retries transient errors itself, within its deadline, and a
    # refused archive or a digest mismatch would only fail again
    _with_secret(download, target.training.s3_secret, S3_ENV, target)
    _with_mlflow_secret(download, target)
    raw = download.outputs["dataset"]
    if target.preprocess_pods > 1:
        return Data(_preprocess_in_slices(s, target, raw), download.outputs["Output"])
    preprocess = ops.preprocess_op(raw=raw, **s.preprocess)
    _cpu_task(preprocess, target, cpu="2", memory="4Gi")
    return Data(preprocess.outputs["arrays"], download.outputs["Output"])


def _preprocess_in_slices(s: Settings, target: ClusterTarget, raw: Any) -> Any:
    """Preprocess over ``target.preprocess_pods`` pods: a plan (every photo hashed, the
    split drawn), the slices of its shards decoded in parallel, their shards joined."""
    plan = ops.preprocess_plan_op(raw=raw, slices=target.preprocess_pods, **s.preprocess)
    _cpu_task(plan, target, cpu="2", memory="2Gi")
    with dsl.ParallelFor(list(range(target.preprocess_pods))) as index:
        part = ops.preprocess_slice_op(raw=raw, plan=plan.outputs["plan"], index=index)
        _cpu_task(part, target, cpu="2", memory="4Gi")
    join = ops.preprocess_join_op(
        raw=raw, plan=plan.outputs["plan"], slices=dsl.Collected(part.outputs["shards"])
    )
    _cpu_task(join, target, cpu="1", memory="1Gi")
    return join.outputs["arrays"]


def _training_inputs(s: Settings, arrays: Any) -> dict[str, Any]:
    return dict(
        arrays=arrays,
        tracking_uri=s.tracking_uri,
        checkpoint_root=s.checkpoint_root,
        kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
        pipeline_name=PIPELINE_NAME,
        **s.train,
    )


def _after_training(
    s: Settings, data: Data, trained: Any, target: ClusterTarget
) -> tuple[Any, Any, Any]:
    """The trained model's evaluate, register (the gate) and deploy tasks, in order."""
    evaluate = _evaluate_task(s, data, trained, target)
    register = _register_task(
        s, data.arrays, trained.outputs["Output"], evaluate.outputs["accuracy"], target
    )
    deploy = _deploy_task(s, register, trained.outputs["Output"], target)
    return evaluate, register, deploy


def _evaluate_task(
    s: Settings, data: Data, train: Any, target: ClusterTarget, combination: Any = ""
) -> Any:
    evaluate = ops.evaluate_op(
        arrays=data.arrays,
        source_listing=data.listing,
        model=train.outputs["trained_model"],
        mlflow_run_id=train.outputs["Output"],
        tracking_uri=s.tracking_uri,
        combination=combination,
        **s.evaluate,
    )
    _cpu_task(evaluate, target, cpu="2", memory="8Gi").set_caching_options(False)
    _with_mlflow_secret(evaluate, target)
    return evaluate


def _register_task(
    s: Settings, arrays: Any, run_id: Any, test_accuracy: Any, target: ClusterTarget
) -> Any:
    register = ops.register_op(
        arrays=arrays,
        mlflow_run_id=run_id,
        test_accuracy=test_accuracy,
        tracking_uri=s.tracking_uri,
        **s.register,
    )
    # the alias's holder may be scored again on the test photos: its graph and a batch
    _cpu_task(register, target, cpu="2", memory="2Gi").set_caching_options(False)
    _with_mlflow_secret(register, target)
    return register


def _deploy_task(s: Settings, register: Any, run_id: Any, target: ClusterTarget) -> Any:
    """After the gate: serves the version it gave the alias when ``deploy`` is on; else it
    only says why not (a task either way, so the run's ``serving_url`` always has a value)."""
    deploy = ops.deploy_op(
        deploy=s.deploy,
        took_alias=register.outputs["took_alias"],
        model_version=register.outputs["version"],
        mlflow_run_id=run_id,
        tracking_uri=s.tracking_uri,
        image=target.image,
        **s.serving,
    )
    _cpu_task(deploy, target, cpu="250m", memory="512Mi").set_caching_options(False)
    _with_mlflow_secret(deploy, target)
    return deploy


def _cpu_task(task: Any, target: ClusterTarget, cpu: str, memory: str) -> Any:
    """CPU image; requests as given, limits twice that."""
    task.set_container_image(target.image)
    return (
        task.set_cpu_request(cpu)
        .set_cpu_limit(twice_cpu(cpu))
        .set_memory_request(memory)
        .set_memory_limit(twice_memory(memory))
    )


def _launcher_task(task: Any, target: ClusterTarget, cpu: str, memory: str) -> None:
    """A task that launches training elsewhere (a TrainJob, Katib's trials) and waits on it:
    small, uncached, retried like training, with the shared volume and MLflow's secret."""
    _cpu_task(task, target, cpu=cpu, memory=memory).set_caching_options(False)
    _retry_training(task, target)
    kubernetes.mount_pvc(task, pvc_name=target.shared_pvc, mount_path="/shared")
    _with_mlflow_secret(task, target)


def _retry_training(task: Any, target: ClusterTarget) -> None:
    """Retries of a training task (or of the TrainJob launcher): training resumes."""
    # Argo counts the retry window from the first attempt's start and cuts a retried pod
    # at its end; KFP's default of an hour would leave multi-hour training unretried
    task.set_retry(
        num_retries=target.train_retries,
        backoff_duration="60s",
        backoff_factor=2,
        backoff_max_duration=TRAIN_RETRY_WINDOW,
    )


def _gpus(s: Settings, target: ClusterTarget) -> Any:
    """Processes per train pod: one per GPU on GPU hardware, one on a CPU node."""
    return s.gpus if target.training.on_gpu else 1


def _train_task(task: Any, target: ClusterTarget, gpus: Any) -> None:
    """The train task placed as ``target.training`` says: its hardware's image, GPUs (on GPU
    hardware), node selector, toleration, Kueue labels, shm, retries."""
    placement = target.training
    task.set_container_image(target.train_image)
    task.set_cpu_request(placement.cpu).set_cpu_limit(placement.cpu_limit)
    task.set_memory_request(placement.memory).set_memory_limit(placement.memory)
    if placement.on_gpu:
        task.set_accelerator_type(placement.gpu_resource).set_accelerator_limit(gpus)
    for key, value in placement.kueue_labels.items():  # Kueue's pod integration admits it
        kubernetes.add_pod_label(task, key, value)
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


def _with_mlflow_secret(task: Any, target: ClusterTarget) -> None:
    _with_secret(task, target.training.mlflow_secret, MLFLOW_ENV, target)


def _with_secret(task: Any, secret: str, env: dict[str, str], target: ClusterTarget) -> None:
    """The secret's keys as env: optional where the backend allows, else it must exist."""
    if target.optional_secrets:
        kubernetes.use_secret_as_env(task, secret, env, optional=True)
    else:
        kubernetes.use_secret_as_env(task, secret, env)
