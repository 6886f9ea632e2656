"""Multi-node training as a Kubeflow Trainer v2 TrainJob: its shape and its launcher's life.

The TrainJob is checked against Trainer's own API models (kubeflow-trainer-api 2.3) and
its pods against the Kubernetes schema. The launcher runs against ``tests/support/kube_api.py``,
a stand-in for the Kubernetes API server (none runs on these machines).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import kubernetes_validate
import pytest
from kubeflow_trainer_api import models
from kubernetes.client import ApiClient, Configuration

from components.cluster import kube, trainjob
from components.cluster.placement import Placement
from components.recipes.presets import ON_GPU
from components.training.config import TrainConfig
from tests.support.kube_api import FakeKubeApi, condition

GPU_IMAGE = "registry.example/dogs-vs-cats-cuda:1.2.3"
GPU_NODE = Placement(**ON_GPU)  # the GPU presets' train pods
RUN_ID = "8d6f3c1e-5b7a-4e2f-9c0d-1a2b3c4d5e6f"
NAME = trainjob.trainjob_name(RUN_ID)


def flag_value(command: list[str], flag: str) -> str:
    """The value of ``--flag=value`` in a command line."""
    (value,) = [word.split("=", 1)[1] for word in command if word.startswith(f"{flag}=")]
    return value


def make_job(**overrides) -> trainjob.ClusterJob:
    settings = dict(
        name=NAME,
        namespace="team-a",
        image=GPU_IMAGE,
        nodes=3,
        gpus_per_node=4,
        tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000",
        shared_pvc="dogs-vs-cats-shared",
        placement=GPU_NODE,
    )
    return trainjob.ClusterJob(**{**settings, **overrides})


def cfg(**overrides) -> TrainConfig:
    defaults = dict(data="/shared/run/arrays", output="/shared/run/model", epochs=7, resume=True)
    return TrainConfig(**{**defaults, "kfp_run_id": RUN_ID, **overrides})


def built(**job_overrides) -> dict:
    return trainjob.build_trainjob(cfg(), make_job(**job_overrides)).to_dict()


def earlier_attempt(tmp_path, *conditions: dict) -> dict:
    """The TrainJob an earlier attempt of the launcher created, in the state it is in now."""
    staged = tmp_path / "shared" / NAME
    remote = cfg(data=str(staged / "arrays"), output=str(staged / "model"))
    job = make_job(shared_mount=str(tmp_path / "shared"))
    return {
        **trainjob.build_trainjob(remote, job).to_dict(),
        "status": {"conditions": [*conditions]},
    }


def node_pod_spec(manifest: dict) -> dict:
    (patch,) = manifest["spec"]["runtimePatches"]
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert replicated["name"] == "node"
    return replicated["template"]["spec"]["template"]["spec"]


def test_the_trainjob_runs_the_train_step_with_the_single_node_settings():
    manifest = built()
    assert manifest["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert manifest["kind"] == "TrainJob" and manifest["metadata"]["name"] == NAME
    spec = manifest["spec"]
    assert spec["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "torch-distributed",
    }
    trainer = spec["trainer"]
    assert trainer["image"] == GPU_IMAGE
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (3, 4)
    place = GPU_NODE
    assert trainer["resourcesPerNode"] == {
        "requests": {"cpu": place.cpu, "memory": place.memory, "nvidia.com/gpu": "4"},
        "limits": {"cpu": place.cpu_limit, "memory": place.memory, "nvidia.com/gpu": "4"},
    }
    command = trainer["command"]
    assert command[:5] == ["python", "-m", "torch.distributed.run", "-m", "components.train"]
    assert "--resume" in command and flag_value(command, "--epochs") == "7"
    assert flag_value(command, "--kfp-run-id") == RUN_ID
    env = {item["name"]: item for item in trainer["env"]}
    assert env["MLFLOW_TRACKING_URI"]["value"] == "http://mlflow.mlflow.svc.cluster.local:5000"
    assert env["AWS_SECRET_ACCESS_KEY"]["valueFrom"]["secretKeyRef"] == {
        "name": "dogs-vs-cats-s3",
        "key": "AWS_SECRET_ACCESS_KEY",
        "optional": True,
    }
    assert env["MLFLOW_TRACKING_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"] == (
        "dogs-vs-cats-mlflow"
    )
    pod = node_pod_spec(manifest)
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["securityContext"]["fsGroup"] == 10001  # the image's group owns the volume
    assert pod["serviceAccountName"] == "dogs-vs-cats-pipeline"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": place.shm_size}
    assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == "dogs-vs-cats-shared"
    (container,) = pod["containers"]
    assert container["name"] == "node"
    assert {m["mountPath"] for m in container["volumeMounts"]} == {"/dev/shm", "/shared"}
    assert spec["activeDeadlineSeconds"] == make_job().timeout_seconds


def test_placement_and_runtime_follow_the_compile_settings():
    place = Placement(node_selector="", toleration_key="", cpu="500m", shm_size="1Gi")
    manifest = built(placement=place, runtime="torch-cuda-128")
    pod = node_pod_spec(manifest)
    assert "tolerations" not in pod and "nodeSelector" not in pod
    assert manifest["spec"]["runtimeRef"]["name"] == "torch-cuda-128"
    assert manifest["spec"]["trainer"]["resourcesPerNode"]["limits"]["cpu"] == "1"


def test_the_trainjob_is_valid_for_trainer_v2_and_its_pods_for_kubernetes():
    manifest = built()
    # Trainer's API models read it back without loss: no field they do not know
    assert models.TrainerV1alpha1TrainJob.from_dict(manifest).to_dict() == manifest
    # the pod that the runtime's node template becomes, with our patch and trainer
    # settings applied, passes the Kubernetes schema strictly
    pod = node_pod_spec(manifest)
    trainer = manifest["spec"]["trainer"]
    container = {
        **pod["containers"][0],
        "image": trainer["image"],
        "command": trainer["command"],
        "env": trainer["env"],
        "resources": trainer["resourcesPerNode"],
    }
    merged = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "node-0-0"}}
    merged["spec"] = {**pod, "containers": [container]}
    kubernetes_validate.validate(merged, "1.30.0", strict=True)


def test_the_trainjob_validates_strictly_against_trainers_own_crd():
    from tests.support.crds import TRAIN_JOB, errors

    manifest = built()
    assert errors(manifest, TRAIN_JOB) == []
    misplaced = {**manifest, "spec": {**manifest["spec"], "replicas": 2}}  # not a TrainJob field
    assert errors(misplaced, TRAIN_JOB) == [
        "spec: Additional properties are not allowed ('replicas' was unexpected)"
    ]


def test_the_name_is_a_dns_label_short_enough_for_the_jobset_pods():
    assert re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", NAME) and len(NAME) <= 40
    assert trainjob.trainjob_name("Run-" + "x" * 80).startswith("dvc-run-")


def test_one_node_is_not_a_trainjob():
    with pytest.raises(ValueError, match="2 or more nodes"):
        make_job(nodes=1)


def pods_that_write_a_model(job: dict) -> None:
    """What rank 0 leaves on the shared volume: the model and its MLflow run."""
    command = job["spec"]["trainer"]["command"]
    output = flag_value(command, "--output")
    Path(output).mkdir(parents=True)
    (Path(output) / "mlflow_run_id").write_text("mlflow-run-7")
    (Path(output) / "model.pt").write_bytes(b"weights")


def launch(api: FakeKubeApi, tmp_path, **job_overrides) -> str:
    arrays = tmp_path / "arrays"
    arrays.mkdir(exist_ok=True)
    (arrays / "meta.json").write_text("{}")
    config = TrainConfig(data=str(arrays), output=str(tmp_path / "out"), kfp_run_id=RUN_ID)
    settings = {"shared_mount": str(tmp_path / "shared"), "poll_seconds": 0.05, **job_overrides}
    job = make_job(**settings)
    return trainjob.train_on_cluster(config, job, ApiClient(Configuration(host=api.url)))


@pytest.fixture
def logs(caplog):
    caplog.set_level(logging.INFO, logger="components.cluster.trainjob")
    return caplog


def test_the_launcher_runs_the_trainjob_surfaces_rank_0s_log_and_cleans_up(tmp_path, logs):
    with FakeKubeApi("Complete", on_create=pods_that_write_a_model) as api:
        run_id = launch(api, tmp_path)
    assert run_id == "mlflow-run-7"
    assert (tmp_path / "out/model.pt").read_bytes() == b"weights"
    (created,) = api.created
    command = created["spec"]["trainer"]["command"]
    assert flag_value(command, "--data") == str(tmp_path / "shared" / NAME / "arrays")
    assert (
        len(api.polls) >= 2
        and max(b - a for a, b in zip(api.polls, api.polls[1:], strict=False)) < 5
    )
    assert api.pod_queries[-1] == (
        f"jobset.sigs.k8s.io/jobset-name={NAME},jobset.sigs.k8s.io/replicatedjob-name=node,"
        "batch.kubernetes.io/job-completion-index=0"
    )
    assert api.logs_read == [(f"{NAME}-node-0-0-x7k2p", "node")]
    assert f"epoch 1/1 val_accuracy=0.9 ({NAME}-node-0-0-x7k2p)" in logs.text
    assert api.deleted == [NAME]
    assert not (tmp_path / "shared" / NAME).exists()  # the staged data and model, removed
    assert (tmp_path / "arrays/meta.json").is_file()  # the step's input, untouched


def test_a_failed_trainjob_fails_the_step_with_its_reason_and_is_cleaned_up(tmp_path, logs):
    with FakeKubeApi("Failed", on_create=pods_that_write_a_model) as api:
        with pytest.raises(RuntimeError, match="node-0 exited with code 1"):
            launch(api, tmp_path)
    assert api.deleted == [NAME] and "node-0-0" in logs.text
    assert not (tmp_path / "out").exists() and not (tmp_path / "shared" / NAME).exists()


def test_a_trainjob_past_the_timeout_is_deleted(tmp_path, logs):
    with FakeKubeApi(outcome=None) as api:
        with pytest.raises(TimeoutError, match="did not finish within 1 s"):
            launch(api, tmp_path, timeout_seconds=1)
    assert len(api.polls) > 3 and api.deleted == [NAME]
    assert not (tmp_path / "shared" / NAME).exists()


def test_a_missing_runtime_is_named_with_those_the_cluster_has(tmp_path):
    with FakeKubeApi(runtimes=("torch-cuda-128",)) as api:
        with pytest.raises(RuntimeError) as raised:
            launch(api, tmp_path)
    message = str(raised.value)
    assert "'torch-distributed'" in message and "found torch-cuda-128" in message
    assert api.created == [] and not (tmp_path / "shared").exists()


def test_a_retried_launcher_waits_for_the_trainjob_its_lost_attempt_started(tmp_path, logs):
    with FakeKubeApi() as api:
        api.jobs[NAME] = earlier_attempt(tmp_path, condition("Complete", "Done", "completed"))
        pods_that_write_a_model(api.jobs[NAME])  # what it wrote before this attempt began
        run_id = launch(api, tmp_path)
    assert run_id == "mlflow-run-7" and api.created == [] and api.deleted == [NAME]
    assert "earlier attempt" in logs.text


def test_a_retried_launcher_replaces_a_trainjob_that_failed(tmp_path):
    with FakeKubeApi("Complete", on_create=pods_that_write_a_model) as api:
        api.jobs[NAME] = earlier_attempt(tmp_path, condition("Failed", "FailedJobs", "lost"))
        assert launch(api, tmp_path) == "mlflow-run-7"
    assert api.deleted == [NAME, NAME] and len(api.created) == 1


def test_the_wait_outlives_an_api_server_briefly_unavailable(tmp_path, logs):
    def created_then_unavailable(job: dict) -> None:
        pods_that_write_a_model(job)
        api.unavailable_reads = 3  # the reads right after the creation: 503

    with FakeKubeApi("Complete", on_create=created_then_unavailable) as api:
        assert launch(api, tmp_path) == "mlflow-run-7"
    assert logs.text.count("trying again") == 3 and api.deleted == [NAME]


def test_a_read_the_api_server_never_answers_times_out_and_the_wait_goes_on(
    tmp_path, logs, monkeypatch
):
    monkeypatch.setattr(kube, "REQUEST_TIMEOUT", (1, 0.5))  # (10, 30) s in the cluster

    def created_then_silent(job: dict) -> None:
        pods_that_write_a_model(job)
        api.silent_reads = 2  # accepted, never answered

    with FakeKubeApi("Complete", on_create=created_then_silent) as api:
        assert launch(api, tmp_path) == "mlflow-run-7"
    # each silent read ended at its timeout, and the wait went on to the job's outcome
    assert logs.text.count("Read timed out. (read timeout=0.5)") == 2


def test_a_trainjob_the_cluster_refuses_is_a_clear_error(tmp_path):
    with FakeKubeApi() as api:
        api.refuse_creation = True
        with pytest.raises(RuntimeError, match="the cluster refused TrainJob .* 422"):
            launch(api, tmp_path)
    assert not (tmp_path / "shared" / NAME).exists()


@pytest.mark.parametrize("run_id", ["ABC_def.ghi", "Run 7/b", "0a1b-" * 20])
def test_a_trainjob_name_is_a_dns_label_whatever_the_run_id(run_id):
    name = trainjob.trainjob_name(run_id)
    assert re.fullmatch(r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?", name), name


def test_kueue_admits_the_trainjob_by_its_queue_and_a_mig_slice_is_asked_for():
    place = Placement(
        **{**ON_GPU, "queue_name": "team-a-gpu", "gpu_resource": "nvidia.com/mig-1g.10gb"}
    )
    manifest = built(placement=place)
    assert manifest["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a-gpu"
    resources = manifest["spec"]["trainer"]["resourcesPerNode"]
    assert (
        resources["limits"]["nvidia.com/mig-1g.10gb"]
        == resources["requests"]["nvidia.com/mig-1g.10gb"]
    )
    assert "nvidia.com/gpu" not in resources["limits"]
    from tests.support.crds import TRAIN_JOB, errors

    assert errors(manifest, TRAIN_JOB) == []
