"""The pipeline: download -> preprocess -> train (GPU) -> evaluate -> quality gate.

Wiring, resources and Kubernetes settings only; the work is in ``components``. (No
``from __future__ import annotations``: KFP reads the pipeline's annotations as types.)
"""

from typing import NamedTuple

from kfp import dsl, kubernetes

from components.download import PETIMAGES_URL
from pipeline import ops
from pipeline.settings import ClusterSettings

PIPELINE_NAME = "dogs-vs-cats"
CLUSTER_TRACKING_URI = "http://mlflow.mlflow.svc.cluster.local:5000"
GPU = "nvidia.com/gpu"
S3_ENV = {key: key for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL")}
MLFLOW_ENV = {key: key for key in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD")}


class PipelineOutputs(NamedTuple):
    """What a finished run hands back: where to look in MLflow, and how it went."""

    mlflow_run_id: str
    test_accuracy: float
    gate: str


def build_pipeline(settings: ClusterSettings = ClusterSettings()):
    """The ``@dsl.pipeline`` function for ``settings``: compile it, or call it under kfp.local."""

    @dsl.pipeline(
        name=PIPELINE_NAME, description="Train, evaluate and register a Dogs-vs-Cats classifier."
    )
    def dogs_vs_cats(
        source: str = PETIMAGES_URL,
        sha256: str = "",
        image_size: int = 50,
        channels: int = 1,
        val_fraction: float = 0.1,
        test_fraction: float = 0.1,
        seed: int = 0,
        model: str = "tutorial_cnn",
        epochs: int = 10,
        batch_size: int = 100,
        lr: float = 0.001,
        weight_decay: float = 0.0,
        schedule: str = "constant",
        gpus: int = 1,
        tracking_uri: str = CLUSTER_TRACKING_URI,
        experiment: str = "dogs-vs-cats",
        checkpoint_root: str = "",
        min_accuracy: float = 0.85,
        registered_model_name: str = "dogs-vs-cats",
    ) -> PipelineOutputs:
        download = ops.download_op(source=source, sha256=sha256)
        _cpu_task(download, settings, cpu="1", memory="2Gi")
        download.set_retry(num_retries=3, backoff_duration="30s", backoff_factor=2)
        kubernetes.use_secret_as_env(download, settings.s3_secret, S3_ENV, optional=True)

        preprocess = ops.preprocess_op(
            raw=download.outputs["dataset"],
            image_size=image_size,
            channels=channels,
            val_fraction=val_fraction,
            test_fraction=test_fraction,
            seed=seed,
        )
        _cpu_task(preprocess, settings, cpu="8", memory="16Gi")

        training = dict(
            arrays=preprocess.outputs["arrays"],
            model_name=model,
            epochs=epochs,
            batch_size=batch_size,
            lr=lr,
            weight_decay=weight_decay,
            schedule=schedule,
            seed=seed,
            gpus=gpus,
            tracking_uri=tracking_uri,
            experiment=experiment,
            checkpoint_root=checkpoint_root,
            kfp_run_id=dsl.PIPELINE_JOB_ID_PLACEHOLDER,
            pipeline_name=PIPELINE_NAME,
        )
        if settings.nodes > 1:  # compiled for several nodes: a PyTorchJob does the training
            train = ops.pytorchjob_op(
                nodes=settings.nodes,
                gpu_image=settings.gpu_image,
                shared_pvc=settings.shared_pvc,
                **training,
            )
            _cpu_task(train, settings, cpu="1", memory="4Gi").set_caching_options(False)
            kubernetes.mount_pvc(train, pvc_name=settings.shared_pvc, mount_path="/shared")
            _with_mlflow_secret(train, settings)
        else:
            train = ops.train_op(**training)
            _gpu_task(train, settings, gpus)
        run_id = train.outputs["Output"]
        trained = train.outputs["model"]

        evaluate = ops.evaluate_op(
            arrays=preprocess.outputs["arrays"],
            model=trained,
            mlflow_run_id=run_id,
            tracking_uri=tracking_uri,
            experiment=experiment,
        )
        _cpu_task(evaluate, settings, cpu="2", memory="8Gi").set_caching_options(False)
        _with_mlflow_secret(evaluate, settings)

        gate = ops.register_op(
            mlflow_run_id=run_id,
            test_accuracy=evaluate.outputs["accuracy"],
            min_accuracy=min_accuracy,
            registered_model_name=registered_model_name,
            tracking_uri=tracking_uri,
        )
        _cpu_task(gate, settings, cpu="500m", memory="1Gi").set_caching_options(False)
        _with_mlflow_secret(gate, settings)
        return PipelineOutputs(
            mlflow_run_id=evaluate.outputs["mlflow_run_id"],
            test_accuracy=evaluate.outputs["accuracy"],
            gate=gate.outputs["reason"],
        )

    return dogs_vs_cats


def _cpu_task(task, settings: ClusterSettings, cpu: str, memory: str):
    """CPU image; requests as given, limits twice that."""
    task.set_container_image(settings.image)
    return _resources(task, cpu, memory)


def _resources(task, cpu: str, memory: str):
    limit_cpu = f"{int(cpu[:-1]) * 2}m" if cpu.endswith("m") else str(int(cpu) * 2)
    limit_memory = f"{int(memory[:-2]) * 2}Gi"
    return (
        task.set_cpu_request(cpu)
        .set_cpu_limit(limit_cpu)
        .set_memory_request(memory)
        .set_memory_limit(limit_memory)
    )


def _gpu_task(task, settings: ClusterSettings, gpus) -> None:
    """CUDA image on a GPU node: accelerators, taint toleration, shm, retries, no cache."""
    task.set_container_image(settings.gpu_image)
    _resources(task, "4", "16Gi")
    task.set_accelerator_type(GPU).set_accelerator_limit(gpus)
    task.set_retry(num_retries=2, backoff_duration="60s", backoff_factor=2)
    task.set_caching_options(False)
    kubernetes.add_toleration(task, key=GPU, operator="Exists", effect="NoSchedule")
    if settings.gpu_node_selector:
        kubernetes.add_node_selector(task, *settings.gpu_node_selector)
    kubernetes.empty_dir_mount(
        task,
        volume_name="dshm",
        mount_path="/dev/shm",
        medium="Memory",
        size_limit=settings.shm_size,
    )
    kubernetes.use_secret_as_env(task, settings.s3_secret, S3_ENV, optional=True)
    _with_mlflow_secret(task, settings)


def _with_mlflow_secret(task, settings: ClusterSettings) -> None:
    kubernetes.use_secret_as_env(task, settings.mlflow_secret, MLFLOW_ENV, optional=True)
