"""Multi-node training as a Kubeflow Trainer v2 TrainJob: build it, run it, clean up.

The TrainJob refers to a training runtime the cluster offers (``torch-distributed`` by
default) and sets what the runtime leaves open: image, command, node count, processes
and resources per node (``spec.trainer``), and the pods' placement, volumes, secrets and
security (one ``spec.runtimePatches`` entry, under this project's manager name). The
runtime's torch plugin sets the ``PET_*`` variables torchrun reads (nodes, rank, master
address). Data and outputs travel through a ReadWriteMany volume that the launching task
mounts too, in a folder named after the job and removed when the job ends.
"""

from __future__ import annotations

import logging
import re
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kubeflow_trainer_api import models
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from components.cluster import kube
from components.cluster.placement import Placement
from components.core import schema
from components.core.names import RUN_ID_FILE
from components.core.workspace import workspace_env
from components.training.config import TrainConfig

log = logging.getLogger(__name__)

GROUP, VERSION = "trainer.kubeflow.org", "v1alpha1"
KIND, PLURAL = "TrainJob", "trainjobs"
RUNTIME_KIND, RUNTIME_PLURAL = "ClusterTrainingRuntime", "clustertrainingruntimes"
NODE = "node"  # the replicated job, and its container, that torch runtimes train in
MANAGER = "dogs-vs-cats.kubeflow.org/pipeline"  # who owns our runtime patch
APP_GID = 10001  # the image's user and group: fsGroup makes the shared volume theirs
POD_LABELS = (  # the JobSet the TrainJob becomes labels its pods with these
    "jobset.sigs.k8s.io/jobset-name={name},"
    f"jobset.sigs.k8s.io/replicatedjob-name={NODE},"
    "batch.kubernetes.io/job-completion-index=0"
)


@dataclass(frozen=True)
class ClusterJob:
    """Where and how the TrainJob's pods run; the same placement as the single-node task."""

    name: str
    namespace: str
    image: str
    nodes: int
    gpus_per_node: int  # processes per node: one per GPU (one on CPU hardware)
    tracking_uri: str
    shared_pvc: str
    runtime: str = "torch-distributed"
    placement: Placement = Placement()
    shared_mount: str = "/shared"
    service_account: str = "dogs-vs-cats-pipeline"
    timeout_seconds: int = 7 * 24 * 3600
    poll_seconds: float = 15

    def __post_init__(self) -> None:
        if self.nodes < 2 or self.gpus_per_node < 1:
            raise ValueError(
                f"a TrainJob is for 2 or more nodes with 1 or more processes each, "
                f"found {self.nodes} nodes with {self.gpus_per_node}"
            )


def trainjob_name(kfp_run_id: str) -> str:
    """A DNS-1035 label per KFP run, short enough for the JobSet's pod host names.

    Letters are lowercased and anything but letters, digits and ``-`` becomes ``-``.
    """
    label = re.sub(r"[^a-z0-9-]", "-", f"dvc-{kfp_run_id}".lower())
    return label[:40].rstrip("-")


def build_trainjob(cfg: TrainConfig, job: ClusterJob) -> models.TrainerV1alpha1TrainJob:
    """The TrainJob (Kubeflow Trainer's API model) that trains ``cfg`` on ``job.nodes``."""
    command = ["python", "-m", "torch.distributed.run", "-m", "components.train"]
    return models.TrainerV1alpha1TrainJob(
        api_version=f"{GROUP}/{VERSION}",
        kind=KIND,
        metadata=models.IoK8sApimachineryPkgApisMetaV1ObjectMeta(
            name=job.name,
            namespace=job.namespace,
            # Kueue admits a TrainJob by its queue label (since Trainer v2.0)
            labels={"app.kubernetes.io/part-of": "dogs-vs-cats", **job.placement.kueue_labels},
        ),
        spec=models.TrainerV1alpha1TrainJobSpec(
            runtime_ref=models.TrainerV1alpha1RuntimeRef(
                api_group=GROUP, kind=RUNTIME_KIND, name=job.runtime
            ),
            trainer=models.TrainerV1alpha1Trainer(
                image=job.image,
                command=command + schema.to_argv(cfg),
                num_nodes=job.nodes,
                num_proc_per_node=job.gpus_per_node,
                resources_per_node=_resources(job),
                env=_env(job),
            ),
            runtime_patches=[_pod_patch(job)],
            active_deadline_seconds=job.timeout_seconds,
        ),
    )


def _resources(job: ClusterJob) -> models.IoK8sApiCoreV1ResourceRequirements:
    place = job.placement
    gpus = {place.gpu_resource: str(job.gpus_per_node)} if place.on_gpu else {}
    requests = {"cpu": place.cpu, "memory": place.memory, **gpus}
    limits = {"cpu": place.cpu_limit, "memory": place.memory, **gpus}
    return models.IoK8sApiCoreV1ResourceRequirements(
        requests={key: _quantity(value) for key, value in requests.items()},
        limits={key: _quantity(value) for key, value in limits.items()},
    )


def _quantity(value: str) -> models.IoK8sApimachineryPkgApiResourceQuantity:
    return models.IoK8sApimachineryPkgApiResourceQuantity(value)


def _env(job: ClusterJob) -> list[models.IoK8sApiCoreV1EnvVar]:
    """MLflow's address (and workspace), and each secret key as an optional variable (as on
    one node)."""
    from_secrets = [
        models.IoK8sApiCoreV1EnvVar(
            name=key,
            value_from=models.IoK8sApiCoreV1EnvVarSource(
                secret_key_ref=models.IoK8sApiCoreV1SecretKeySelector(
                    name=secret, key=key, optional=True
                )
            ),
        )
        for secret, keys in job.placement.secret_keys.items()
        for key in keys
    ]
    tracking = models.IoK8sApiCoreV1EnvVar(name="MLFLOW_TRACKING_URI", value=job.tracking_uri)
    workspace = [
        models.IoK8sApiCoreV1EnvVar(name=name, value=value)
        for name, value in workspace_env().items()
    ]
    return [tracking, *workspace, *from_secrets]


def _pod_patch(job: ClusterJob) -> models.TrainerV1alpha1RuntimePatch:
    """Placement, volumes and security of every node's pod, as one runtime patch."""
    place = job.placement
    container = models.TrainerV1alpha1ContainerPatch(
        name=NODE,
        volume_mounts=[
            models.IoK8sApiCoreV1VolumeMount(name="dshm", mount_path="/dev/shm"),
            models.IoK8sApiCoreV1VolumeMount(name="shared", mount_path=job.shared_mount),
        ],
        security_context=models.IoK8sApiCoreV1SecurityContext(
            allow_privilege_escalation=False,
            run_as_non_root=True,
            capabilities=models.IoK8sApiCoreV1Capabilities(drop=["ALL"]),
        ),
    )
    pod = models.TrainerV1alpha1PodSpecPatch(
        service_account_name=job.service_account,
        security_context=models.IoK8sApiCoreV1PodSecurityContext(
            fs_group=APP_GID,
            run_as_non_root=True,
            seccomp_profile=models.IoK8sApiCoreV1SeccompProfile(type="RuntimeDefault"),
        ),
        tolerations=[
            models.IoK8sApiCoreV1Toleration(
                key=place.toleration_key, operator="Exists", effect="NoSchedule"
            )
        ]
        if place.toleration_key
        else None,
        node_selector=dict([place.node_label]) if place.node_label else None,
        volumes=[
            models.IoK8sApiCoreV1Volume(
                name="dshm",
                empty_dir=models.IoK8sApiCoreV1EmptyDirVolumeSource(
                    medium="Memory", size_limit=_quantity(place.shm_size)
                ),
            ),
            models.IoK8sApiCoreV1Volume(
                name="shared",
                persistent_volume_claim=models.IoK8sApiCoreV1PersistentVolumeClaimVolumeSource(
                    claim_name=job.shared_pvc
                ),
            ),
        ],
        containers=[container],
    )
    replicated = models.TrainerV1alpha1ReplicatedJobPatch(
        name=NODE,
        template=models.TrainerV1alpha1JobTemplatePatch(
            spec=models.TrainerV1alpha1JobSpecPatch(
                template=models.TrainerV1alpha1PodTemplatePatch(spec=pod)
            )
        ),
    )
    return models.TrainerV1alpha1RuntimePatch(
        manager=MANAGER,
        training_runtime_spec=models.TrainerV1alpha1TrainingRuntimeSpecPatch(
            template=models.TrainerV1alpha1JobSetTemplatePatch(
                spec=models.TrainerV1alpha1JobSetSpecPatch(replicated_jobs=[replicated])
            )
        ),
    )


def train_on_cluster(cfg: TrainConfig, job: ClusterJob, api_client: k8s.ApiClient) -> str:
    """Stage the data, run the TrainJob to its end, bring the model back; the MLflow run id.

    A TrainJob of the same name left running by an earlier attempt of this KFP run (its
    launcher pod was lost) is waited for, not duplicated; one that failed is replaced
    (training resumes from its checkpoints). Rank 0's log is copied into this step's log;
    the TrainJob and the staged folder are deleted whether it completes, fails or times out.

    Raises:
        RuntimeError: the runtime is not installed, or the TrainJob failed (with its reason).
        TimeoutError: the TrainJob did not finish within ``job.timeout_seconds``.
    """
    objects = k8s.CustomObjectsApi(api_client)
    _require_runtime(objects, job.runtime)
    staging = Path(job.shared_mount) / job.name
    earlier = _get(objects, job)
    try:
        if earlier is not None and _outcome(earlier)[0] != "Failed":
            log.info("TrainJob %s of an earlier attempt is still there: waiting for it", job.name)
        else:
            if earlier is not None:
                _delete(objects, job, wait=True)
            shutil.copytree(cfg.data, staging / "arrays", dirs_exist_ok=True)
            remote = replace(cfg, data=str(staging / "arrays"), output=str(staging / "model"))
            _create(objects, job, build_trainjob(remote, job).to_dict())
            log.info("created TrainJob %s (%d nodes, runtime %s)", job.name, job.nodes, job.runtime)
        _wait(objects, job)
        shutil.copytree(staging / "model", cfg.output, dirs_exist_ok=True)
    finally:
        _surface_logs(k8s.CoreV1Api(api_client), job)
        _delete(objects, job, wait=False)
        shutil.rmtree(staging, ignore_errors=True)
    return (Path(cfg.output) / RUN_ID_FILE).read_text()


def _require_runtime(objects: k8s.CustomObjectsApi, name: str) -> None:
    try:
        objects.get_cluster_custom_object(
            GROUP, VERSION, RUNTIME_PLURAL, name, _request_timeout=kube.REQUEST_TIMEOUT
        )
    except ApiException as err:
        if err.status != 404:
            raise
        found = objects.list_cluster_custom_object(
            GROUP, VERSION, RUNTIME_PLURAL, _request_timeout=kube.REQUEST_TIMEOUT
        )["items"]
        names = ", ".join(item["metadata"]["name"] for item in found) or "none"
        raise RuntimeError(
            f"expected the {RUNTIME_KIND} {name!r} on the cluster, found {names}: install "
            f"Kubeflow Trainer's runtimes (docs/scaling.md) or compile with --trainer-runtime"
        ) from None


def _create(objects: k8s.CustomObjectsApi, job: ClusterJob, body: dict[str, Any]) -> None:
    try:
        objects.create_namespaced_custom_object(
            GROUP, VERSION, job.namespace, PLURAL, body, _request_timeout=kube.REQUEST_TIMEOUT
        )
    except ApiException as err:
        raise RuntimeError(
            f"the cluster refused TrainJob {job.name} in {job.namespace}: "
            f"{err.status} {err.reason}: {err.body}"
        ) from None


def _get(objects: k8s.CustomObjectsApi, job: ClusterJob) -> dict[str, Any] | None:
    return kube.get_or_none(objects, GROUP, VERSION, job.namespace, PLURAL, job.name)


def _outcome(body: dict[str, Any]) -> tuple[str | None, str]:
    """("Complete" or "Failed", and why), or (None, "") while the TrainJob runs."""
    status = models.TrainerV1alpha1TrainJob.from_dict(body).status
    for condition in (status.conditions or []) if status else []:
        if condition.type in ("Complete", "Failed") and condition.status == "True":
            return condition.type, f"{condition.reason}: {condition.message}"
    return None, ""


def _wait(objects: k8s.CustomObjectsApi, job: ClusterJob) -> None:
    deadline = time.monotonic() + job.timeout_seconds
    while time.monotonic() < deadline:
        try:
            body = _get(objects, job)
        except (ApiException, HTTPError) as err:  # a days-long wait outlives API restarts
            if isinstance(err, ApiException) and err.status < 500:
                raise
            log.warning("could not read TrainJob %s (%s); trying again", job.name, err)
            time.sleep(job.poll_seconds)
            continue
        if body is None:
            raise RuntimeError(f"TrainJob {job.name} was deleted before it finished")
        state, why = _outcome(body)
        if state == "Complete":
            return
        if state == "Failed":
            raise RuntimeError(f"TrainJob {job.name} failed: {why}")
        time.sleep(job.poll_seconds)
    raise TimeoutError(f"TrainJob {job.name} did not finish within {job.timeout_seconds} s")


def _delete(objects: k8s.CustomObjectsApi, job: ClusterJob, wait: bool) -> None:
    try:
        objects.delete_namespaced_custom_object(
            GROUP,
            VERSION,
            job.namespace,
            PLURAL,
            job.name,
            propagation_policy="Foreground",
            _request_timeout=kube.REQUEST_TIMEOUT,
        )
    except ApiException as err:
        if err.status != 404:
            raise
    while wait and _get(objects, job) is not None:
        time.sleep(job.poll_seconds)


def _surface_logs(core: k8s.CoreV1Api, job: ClusterJob) -> None:
    """Rank 0's log (node 0, where MLflow is logged from) into this step's log."""
    try:
        pods = core.list_namespaced_pod(
            job.namespace,
            label_selector=POD_LABELS.format(name=job.name),
            _request_timeout=kube.REQUEST_TIMEOUT,
        ).items
        for pod in pods:
            text = core.read_namespaced_pod_log(
                pod.metadata.name,
                job.namespace,
                container=NODE,
                _request_timeout=kube.REQUEST_TIMEOUT,
            )
            log.info("--- %s ---\n%s", pod.metadata.name, text)
    except (ApiException, HTTPError) as err:  # logs are a courtesy; the outcome stands
        log.warning("could not read the logs of TrainJob %s: %s", job.name, err)
