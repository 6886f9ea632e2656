"""Scale-out: DDP under torchrun on the CPU (Gloo), and the multi-node PyTorchJob."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import kubernetes_validate
import pytest
import torch
from kubeflow.training import TrainingClient
from kubeflow.training.api_client import ApiClient
from kubernetes.client import Configuration
from mlflow.tracking import MlflowClient

from components import train
from components.cluster import pytorchjob
from components.cluster.placement import Placement
from components.training import session
from components.training.config import TrainConfig
from components.training.models import build_model
from tests.helpers import run_to_end
from tests.kube_api import FakeKubeApi

GPU_IMAGE = "registry.example/dogs-vs-cats-cuda:1.2.3"


def history(output) -> list[dict]:
    return json.loads((output / "history.json").read_text())


def weights(output: Path) -> dict[str, torch.Tensor]:
    return torch.load(output / "model.pt", weights_only=True)["state_dict"]


def distance(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """The L2 distance between two sets of weights, over the keys of ``b``."""
    return sum(((a[k] - b[k]) ** 2).sum().item() for k in b) ** 0.5


@pytest.mark.slow
def test_two_gloo_processes_train_the_same_weights_as_one(small_arrays, tmp_path, mlflow_store):
    env = {**os.environ, "MLFLOW_TRACKING_URI": mlflow_store}
    common = [
        *("--data", str(small_arrays), "--epochs", "2", "--batch-size", "100"),
        *("--device", "cpu", "--no-augment", "--seed", "3"),
    ]
    run_to_end([*common, "--output", str(tmp_path / "one")], env, tmp_path)
    # two processes the way the pipeline's train step starts them (gpus=2): torchrun
    two_processes = train.parse_config([*common, "--output", str(tmp_path / "two")])
    session.train_processes(two_processes, processes=2)

    # the same global batches in the same order: the same training, up to float rounding
    # (Adam's first steps move near-zero gradients by ±lr whatever their size, so single
    # weights may differ; the whole update and the losses must not)
    for a, b in zip(history(tmp_path / "one"), history(tmp_path / "two"), strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], abs=1e-5)
        assert a["val_loss"] == pytest.approx(b["val_loss"], abs=1e-4)
    one, two = weights(tmp_path / "one"), weights(tmp_path / "two")
    torch.manual_seed(3)
    initial = {f"net.{k}": v for k, v in build_model("tutorial_cnn", 1, 40).state_dict().items()}
    moved = distance(one, initial)
    assert distance(one, two) < 0.05 * moved, (distance(one, two), moved)
    # every image once per epoch, split between the ranks
    for output in ("one", "two"):
        for epoch in history(tmp_path / output):
            assert round(epoch["images_per_second"] * epoch["epoch_seconds"]) == 400
    # the two ranks logged one MLflow run between them, with one point per epoch
    run_id = (tmp_path / "two/mlflow_run_id").read_text()
    steps = [m.step for m in MlflowClient(mlflow_store).get_metric_history(run_id, "val_loss")]
    assert steps == [1, 2]

    # resume the two-process run's checkpoint in one process: any world size will do
    run_to_end(
        [*common, "--output", str(tmp_path / "two"), "--epochs", "3", "--resume"], env, tmp_path
    )
    resumed = history(tmp_path / "two")
    client = MlflowClient(mlflow_store)
    assert client.get_run(run_id).info.run_name == "tutorial_cnn-3ep-seed3"  # was 2ep
    assert [e["epoch"] for e in resumed] == [1, 2, 3]
    assert (tmp_path / "two/mlflow_run_id").read_text() == run_id


def make_job(**overrides) -> pytorchjob.ClusterJob:
    settings = dict(
        name="dogs-vs-cats-run-42",
        namespace="team-a",
        image=GPU_IMAGE,
        nodes=3,
        gpus_per_node=4,
        tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000",
        shared_pvc="dogs-vs-cats-shared",
    )
    return pytorchjob.ClusterJob(**{**settings, **overrides})


def cfg(**overrides) -> TrainConfig:
    return TrainConfig(
        data="/shared/run/arrays",
        output="/shared/run/model",
        epochs=7,
        resume=True,
        kfp_run_id="run-42",
        **overrides,
    )


def as_dict(job) -> dict:
    return ApiClient().sanitize_for_serialization(job)


def test_pytorchjob_replicas_resources_and_placement():
    manifest = as_dict(pytorchjob.build_pytorchjob(cfg(), make_job()))
    assert manifest["apiVersion"] == "kubeflow.org/v1" and manifest["kind"] == "PyTorchJob"
    spec = manifest["spec"]
    assert spec["nprocPerNode"] == "4"
    replicas = spec["pytorchReplicaSpecs"]
    assert (replicas["Master"]["replicas"], replicas["Worker"]["replicas"]) == (1, 2)
    for replica in replicas.values():
        pod = replica["template"]["spec"]
        (container,) = pod["containers"]
        assert container["name"] == "pytorch" and container["image"] == GPU_IMAGE
        assert container["resources"]["limits"]["nvidia.com/gpu"] == "4"
        assert pod["tolerations"] == [
            {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
        ]
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert {
            "name": "MLFLOW_TRACKING_URI",
            "value": "http://mlflow.mlflow.svc.cluster.local:5000",
        } in container["env"]
        assert {e["secretRef"]["name"] for e in container["envFrom"]} == {
            "dogs-vs-cats-s3",
            "dogs-vs-cats-mlflow",
        }
        command = container["command"]
        assert command[:5] == ["python", "-m", "torch.distributed.run", "-m", "components.train"]
        assert "--resume" in command and command[command.index("--epochs") + 1] == "7"
        assert command[command.index("--kfp-run-id") + 1] == "run-42"
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes["dshm"]["emptyDir"] == {
            "medium": "Memory",
            "sizeLimit": Placement().shm_size,
        }
        assert volumes["shared"]["persistentVolumeClaim"]["claimName"] == "dogs-vs-cats-shared"


def test_pytorchjob_validates_against_the_schemas():
    manifest = as_dict(pytorchjob.build_pytorchjob(cfg(), make_job()))
    # the Training Operator SDK's model of the CRD reads it back without loss ...
    client = ApiClient()
    model = client._ApiClient__deserialize(manifest, "KubeflowOrgV1PyTorchJob")
    assert as_dict(model) == manifest
    # ... and every replica's pod passes the Kubernetes schema, strictly
    for name, replica in manifest["spec"]["pytorchReplicaSpecs"].items():
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name.lower()},
            "spec": replica["template"]["spec"],
        }
        kubernetes_validate.validate(pod, "1.30.0", strict=True)


def test_one_node_is_not_a_pytorchjob():
    with pytest.raises(ValueError, match="2 or more nodes"):
        make_job(nodes=1)


def pods_that_write_a_model(shared):
    def write(job: dict) -> None:
        model = shared / job["metadata"]["name"] / "model"
        model.mkdir(parents=True)
        (model / "mlflow_run_id").write_text("mlflow-run-7")
        (model / "model.pt").write_bytes(b"weights")

    return write


def launch_job(api, tmp_path, job_overrides=None):
    arrays = tmp_path / "arrays"
    arrays.mkdir(exist_ok=True)
    (arrays / "meta.json").write_text("{}")
    config = TrainConfig(data=str(arrays), output=str(tmp_path / "out"), kfp_run_id="run-42")
    job = make_job(shared_mount=str(tmp_path / "shared"), poll_seconds=1, **(job_overrides or {}))
    client = TrainingClient(
        client_configuration=Configuration(host=api.url), namespace=job.namespace
    )
    return pytorchjob.train_on_cluster(config, job, training_client=client)


def test_launcher_runs_the_job_surfaces_logs_and_cleans_up(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="components.cluster.pytorchjob")
    with fake_kube(tmp_path) as api:
        run_id = launch_job(api, tmp_path)
    assert run_id == "mlflow-run-7"
    assert (tmp_path / "out/model.pt").read_bytes() == b"weights"
    assert (tmp_path / "shared/dogs-vs-cats-run-42/arrays/meta.json").is_file()
    (created,) = api.created
    assert created["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 2
    command = created["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0][
        "command"
    ]
    assert command[command.index("--data") + 1] == str(
        tmp_path / "shared/dogs-vs-cats-run-42/arrays"
    )
    assert api.deleted == ["dogs-vs-cats-run-42"]
    assert "epoch 1/1 val_accuracy=0.9 (dogs-vs-cats-run-42-master-0)" in caplog.text


def test_a_failed_job_fails_the_step_and_is_still_cleaned_up(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="components.cluster.pytorchjob")
    with fake_kube(tmp_path, outcome="Failed") as api:
        with pytest.raises(RuntimeError, match="Failed"):
            launch_job(api, tmp_path)
    assert api.deleted == ["dogs-vs-cats-run-42"]
    assert "master-0" in caplog.text
    assert not (tmp_path / "out").exists()


def fake_kube(tmp_path, outcome="Succeeded") -> FakeKubeApi:
    """The API server, with the job's pods played by a function that writes their model."""
    return FakeKubeApi(outcome, on_create=pods_that_write_a_model(tmp_path / "shared"))
