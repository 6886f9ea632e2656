"""Multi-node training as a Kubeflow Training Operator PyTorchJob: build it, run it, clean up.

The job's pods run the same ``components.train`` under ``torchrun``, whose node count,
rank and master address come from the ``PET_*`` variables the operator sets. Data and
outputs travel through a ReadWriteMany volume that the launching task mounts too.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, replace
from pathlib import Path

from kubernetes import client as k8s

from components.cluster.placement import GPU, Placement
from components.core import schema
from components.training.config import TrainConfig

log = logging.getLogger(__name__)

KIND = "PyTorchJob"


@dataclass(frozen=True)
class ClusterJob:
    """Where and how the job's pods run; the same placement as the single-node train task."""

    name: str
    namespace: str
    image: str
    nodes: int
    gpus_per_node: int
    tracking_uri: str
    shared_pvc: str
    placement: Placement = Placement()
    shared_mount: str = "/shared"
    service_account: str = "dogs-vs-cats-pipeline"
    timeout_seconds: int = 24 * 3600
    poll_seconds: int = 15

    def __post_init__(self) -> None:
        if self.nodes < 2 or self.gpus_per_node < 1:
            raise ValueError(
                f"a PyTorchJob is for 2 or more nodes with 1 or more GPUs each, "
                f"found {self.nodes} nodes with {self.gpus_per_node} GPUs"
            )


def build_pytorchjob(cfg: TrainConfig, job: ClusterJob):
    """The PyTorchJob (the Training Operator SDK's model) that trains ``cfg`` on ``job.nodes``."""
    from kubeflow.training import models

    command = [
        "python",
        "-m",
        "torch.distributed.run",
        "-m",
        "components.train",
        *schema.to_argv(cfg),
    ]
    replica = {
        "Master": models.KubeflowOrgV1ReplicaSpec(
            replicas=1, restart_policy="OnFailure", template=_pod_template(job, command)
        ),
        "Worker": models.KubeflowOrgV1ReplicaSpec(
            replicas=job.nodes - 1, restart_policy="OnFailure", template=_pod_template(job, command)
        ),
    }
    return models.KubeflowOrgV1PyTorchJob(
        api_version="kubeflow.org/v1",
        kind=KIND,
        metadata=k8s.V1ObjectMeta(
            name=job.name,
            namespace=job.namespace,
            labels={"app.kubernetes.io/part-of": "dogs-vs-cats"},
        ),
        spec=models.KubeflowOrgV1PyTorchJobSpec(
            nproc_per_node=str(job.gpus_per_node),
            pytorch_replica_specs=replica,
            run_policy=models.KubeflowOrgV1RunPolicy(
                clean_pod_policy="None",
                backoff_limit=2,
                active_deadline_seconds=job.timeout_seconds,
            ),
        ),
    )


def _pod_template(job: ClusterJob, command: list[str]) -> k8s.V1PodTemplateSpec:
    place = job.placement
    gpus = str(job.gpus_per_node)
    limits = {"cpu": place.cpu_limit, "memory": place.memory, GPU: gpus}
    container = k8s.V1Container(
        name="pytorch",  # the name the Training Operator looks for
        image=job.image,
        command=command,
        env=[k8s.V1EnvVar(name="MLFLOW_TRACKING_URI", value=job.tracking_uri)],
        env_from=[
            k8s.V1EnvFromSource(secret_ref=k8s.V1SecretEnvSource(name=s, optional=True))
            for s in place.secrets
        ],
        resources=k8s.V1ResourceRequirements(
            requests={"cpu": place.cpu, "memory": place.memory, GPU: gpus},
            limits=limits,
        ),
        volume_mounts=[
            k8s.V1VolumeMount(name="dshm", mount_path="/dev/shm"),
            k8s.V1VolumeMount(name="shared", mount_path=job.shared_mount),
        ],
        security_context=k8s.V1SecurityContext(
            allow_privilege_escalation=False,
            run_as_non_root=True,
            capabilities=k8s.V1Capabilities(drop=["ALL"]),
            seccomp_profile=k8s.V1SeccompProfile(type="RuntimeDefault"),
        ),
    )
    spec = k8s.V1PodSpec(
        containers=[container],
        service_account_name=job.service_account,
        tolerations=[
            k8s.V1Toleration(key=place.toleration_key, operator="Exists", effect="NoSchedule")
        ]
        if place.toleration_key
        else None,
        node_selector=dict([place.node_label]) if place.node_label else None,
        volumes=[
            k8s.V1Volume(
                name="dshm",
                empty_dir=k8s.V1EmptyDirVolumeSource(medium="Memory", size_limit=place.shm_size),
            ),
            k8s.V1Volume(
                name="shared",
                persistent_volume_claim=(
                    k8s.V1PersistentVolumeClaimVolumeSource(claim_name=job.shared_pvc)
                ),
            ),
        ],
    )
    return k8s.V1PodTemplateSpec(spec=spec)


SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def current_namespace(default: str = "kubeflow") -> str:
    """The namespace this pod runs in, where the job goes too."""
    if SERVICE_ACCOUNT_NAMESPACE.is_file():
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip()
    return default


def train_on_cluster(cfg: TrainConfig, job: ClusterJob, training_client=None) -> str:
    """Stage the data on the shared volume, run the PyTorchJob to the end, bring the model back.

    Logs of the master pod are copied into this step's log; the job is deleted whether it
    succeeds or fails. Returns the MLflow run id.
    """
    from kubeflow.training import TrainingClient

    shared = Path(job.shared_mount) / job.name
    shutil.copytree(cfg.data, shared / "arrays", dirs_exist_ok=True)
    remote = replace(cfg, data=str(shared / "arrays"), output=str(shared / "model"))
    client = training_client or TrainingClient(namespace=job.namespace, job_kind=KIND)
    client.create_job(build_pytorchjob(remote, job), namespace=job.namespace)
    try:
        client.wait_for_job_conditions(
            job.name,
            job.namespace,
            job_kind=KIND,
            wait_timeout=job.timeout_seconds,
            polling_interval=job.poll_seconds,
        )
    finally:
        _surface_logs(client, job)
        client.delete_job(job.name, job.namespace, job_kind=KIND)
    shutil.copytree(shared / "model", cfg.output, dirs_exist_ok=True)
    return (Path(cfg.output) / "mlflow_run_id").read_text()


def _surface_logs(client, job: ClusterJob) -> None:
    try:
        logs, _ = client.get_job_logs(job.name, job.namespace, job_kind=KIND, is_master=True)
    except Exception as err:  # noqa: BLE001 - logs are a courtesy; the job's outcome stands
        log.warning("could not read the logs of PyTorchJob %s: %s", job.name, err)
        return
    for pod, text in logs.items():
        log.info("--- %s ---\n%s", pod, text)
