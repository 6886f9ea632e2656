"""The wiring in the compiled spec: tasks, resources, placement, retries, secrets, the
sweep's shape."""

from __future__ import annotations

import pytest
import yaml
from kubernetes.utils import parse_quantity

from components.cluster.placement import Placement
from components.recipes.presets import ON_GPU
from pipeline.__main__ import main as pipeline_main
from tests.pipeline.conftest import GPU_IMAGE, IMAGE, PLANTED, executor, task


def test_train_task_asks_for_gpus_on_a_gpu_node(compiled):
    _, _, spec, platform = compiled
    resources = executor(spec, "train-op")["resources"]
    assert resources["accelerator"]["resourceType"] == "nvidia.com/gpu"
    assert (
        resources["accelerator"]["resourceCount"]
        == "{{$.inputs.parameters['pipelinechannel--gpus']}}"
    )
    assert spec["root"]["inputDefinitions"]["parameters"]["gpus"]["defaultValue"] == 1
    train = platform["exec-train-op"]
    assert train["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert train["nodeSelector"]["labels"] == dict([Placement(**ON_GPU).node_label])
    assert train["emptyDirMounts"] == [
        {
            "volumeName": "dshm",
            "mountPath": "/dev/shm",
            "medium": "Memory",
            "sizeLimit": Placement(**ON_GPU).shm_size,
        }
    ]


def test_where_training_runs_is_chosen_at_compile_time(tmp_path):
    path = tmp_path / "pipeline.yaml"
    pipeline_main(
        [
            *("compile", "--output", str(path), "--cpu", "8", "--memory", "30Gi"),
            *("--node-selector", "cloud.google.com/gke-accelerator=nvidia-l4"),
            *("--toleration-key", "", "--shm-size", "4Gi"),
        ]
    )
    spec, platform = yaml.safe_load_all(path.read_text())
    resources = executor(spec, "train-op")["resources"]
    assert (resources["cpuRequest"], resources["cpuLimit"]) == (8, 16)
    assert resources["memoryRequest"] == resources["memoryLimit"] == 30 * 2**30 / 1e9
    train = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]["exec-train-op"]
    assert train["nodeSelector"]["labels"] == {"cloud.google.com/gke-accelerator": "nvidia-l4"}
    assert "tolerations" not in train
    assert train["emptyDirMounts"][0]["sizeLimit"] == "4Gi"
    with pytest.raises(SystemExit, match="^error: expected a node selector KEY=VALUE"):
        pipeline_main(["compile", "--output", str(path), "--node-selector", "gpu"])


def test_every_step_has_requests_limits_and_its_image(compiled):
    _, _, spec, _ = compiled
    for name in ("download-op", "preprocess-op", "train-op", "evaluate-op", "register-op"):
        container = executor(spec, name)
        resources = container["resources"]
        assert {"cpuRequest", "cpuLimit", "memoryRequest", "memoryLimit"} <= set(resources), name
        assert resources["cpuLimit"] >= resources["cpuRequest"]
        assert container["image"] == (GPU_IMAGE if name == "train-op" else IMAGE)
        assert "pip install" not in " ".join(container["command"])


@pytest.fixture(scope="module")
def compiled_multi_node(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("spec") / "multi-node.yaml"
    pipeline_main(
        [
            *("compile", "--output", str(path), "--image", IMAGE, "--nodes", "2"),
            *("--preprocess-pods", "3"),
        ]
    )
    return next(yaml.safe_load_all(path.read_text()))


@pytest.mark.parametrize("pipeline", ["single-node", "multi-node", "sweep"])
def test_every_tasks_requests_and_limits_are_what_a_profile_grants(
    pipeline, compiled, compiled_multi_node, compiled_sweep
):
    spec = {
        "single-node": compiled[2],
        "multi-node": compiled_multi_node,
        "sweep": compiled_sweep[0],
    }[pipeline]
    for name, found in spec["deploymentSpec"]["executors"].items():
        resources = found["container"]["resources"]
        cpu, cpu_limit, memory, memory_limit = (
            parse_quantity(resources[f"resource{kind}"])
            for kind in ("CpuRequest", "CpuLimit", "MemoryRequest", "MemoryLimit")
        )
        assert memory_limit <= 16 * 2**30 and cpu_limit <= 8, (name, resources)
        assert cpu_limit == 2 * cpu, (name, resources)
        # memory is not overcommitted where a pod holds a GPU: limit = request
        twice = 1 if "accelerator" in resources else 2
        assert memory_limit == twice * memory, (name, resources)
        assert resources["memoryLimit"] == pytest.approx(float(memory_limit) / 1e9), name


def test_retries_and_caching(compiled):
    _, _, spec, _ = compiled
    for name in ("download-op", "preprocess-op", "evaluate-op", "register-op"):
        assert "retryPolicy" not in task(spec, name), name  # their failures are not transient
    retry = task(spec, "train-op")["retryPolicy"]
    assert retry["maxRetryCount"] == 2
    assert retry["backoffMaxDuration"] == f"{7 * 24 * 3600}s"  # not KFP's one hour
    assert task(spec, "download-op")["cachingOptions"]["enableCache"] is True
    assert task(spec, "preprocess-op")["cachingOptions"]["enableCache"] is True
    for name in ("train-op", "evaluate-op", "register-op"):
        assert not task(spec, name)["cachingOptions"].get("enableCache"), name
    download_inputs = task(spec, "download-op")["inputs"]["parameters"]
    assert {"source", "sha256"} <= set(download_inputs)  # a new digest is a new cache key
    train_inputs = task(spec, "train-op")["inputs"]["parameters"]
    assert train_inputs["kfp_run_id"]["runtimeValue"]["constant"] == "{{$.pipeline_job_uuid}}"


def test_compiled_for_several_nodes_training_is_a_trainjob_launch(tmp_path):
    path = tmp_path / "pipeline.yaml"
    pipeline_main(
        [
            "compile",
            "--output",
            str(path),
            "--image",
            IMAGE,
            "--gpu-image",
            GPU_IMAGE,
            "--nodes",
            "3",
            "--trainer-runtime",
            "torch-cuda-128",
        ]
    )
    spec, platform = yaml.safe_load_all(path.read_text())
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert "train-op" not in spec["root"]["dag"]["tasks"]
    retry = task(spec, "trainjob-op")["retryPolicy"]  # a retry attaches to the TrainJob
    assert retry["maxRetryCount"] == 2 and retry["backoffMaxDuration"] == "604800s"
    launcher = task(spec, "trainjob-op")["inputs"]["parameters"]
    assert launcher["nodes"]["runtimeValue"]["constant"] == 3
    assert launcher["image"]["runtimeValue"]["constant"] == GPU_IMAGE
    assert launcher["runtime"]["runtimeValue"]["constant"] == "torch-cuda-128"
    assert executor(spec, "trainjob-op")["image"] == IMAGE
    assert "accelerator" not in executor(spec, "trainjob-op")["resources"]
    assert executors["exec-trainjob-op"]["pvcMount"][0]["mountPath"] == "/shared"
    assert (
        task(spec, "evaluate-op")["inputs"]["artifacts"]["model"]["taskOutputArtifact"][
            "producerTask"
        ]
        == "trainjob-op"
    )


def test_secrets_come_from_kubernetes_and_no_value_is_compiled_in(compiled):
    _, text, _, platform = compiled
    for value in PLANTED.values():
        assert value not in text
    download_env = platform["exec-download-op"]["secretAsEnv"][0]
    assert download_env["secretName"] == "dogs-vs-cats-s3" and download_env["optional"] is True
    names = {e["envVar"] for e in download_env["keyToEnv"]}
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= names
    for name in ("train-op", "evaluate-op", "register-op"):
        secrets = {s["secretName"] for s in platform[f"exec-{name}"]["secretAsEnv"]}
        assert "dogs-vs-cats-mlflow" in secrets


def test_the_sweep_compiles_to_a_parallel_for_of_train_and_evaluate_then_one_register(
    compiled_sweep,
):
    spec, platform = compiled_sweep
    root = spec["root"]
    assert root["inputDefinitions"]["parameters"]["grid"]["parameterType"] == "LIST"
    loop_name = next(name for name in root["dag"]["tasks"] if name.startswith("for-loop"))
    loop = root["dag"]["tasks"][loop_name]
    assert loop["parameterIterator"]["items"]["inputParameter"].endswith("grid")
    assert loop["iteratorPolicy"]["parallelismLimit"] == 4
    body = spec["components"][loop["componentRef"]["name"]]["dag"]["tasks"]
    assert set(body) == {"train-op", "evaluate-op"}
    assert "sweep-parent-op" in loop["dependentTasks"]  # children nest under its run
    assert body["train-op"]["retryPolicy"]["maxRetryCount"] == 2
    # registration judges the best child only
    register = root["dag"]["tasks"]["register-op"]["inputs"]["parameters"]
    assert register["mlflow_run_id"]["taskOutputParameter"]["producerTask"] == "sweep-best-op"
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert executors["exec-train-op"]["tolerations"][0]["key"] == "nvidia.com/gpu"


# a whole value that the backend replaces whole: a parameter, or the run's own id
def test_nothing_is_downloaded_before_the_preflight_passed(compiled, compiled_sweep):
    for spec in (compiled[2], compiled_sweep[0]):
        tasks = spec["root"]["dag"]["tasks"]
        assert "preflight-op" in tasks["download-op"]["dependentTasks"]
        assert not tasks["preflight-op"].get("dependentTasks")
    sweep_tasks = compiled_sweep[0]["root"]["dag"]["tasks"]
    assert "preflight-op" in sweep_tasks["sweep-parent-op"]["dependentTasks"]
    assert sweep_tasks["preflight-op"]["inputs"]["parameters"]["grid"]  # the grid it checks


def test_compile_queue_name_labels_the_gpu_task_for_kueue_and_asks_for_its_gpu_resource(
    tmp_path,
):
    """Kueue has no KFP integration: the GPU task's pod joins the team's queue through
    Kueue's pod integration, by its labels."""
    import yaml

    from pipeline.__main__ import main as pipeline_main

    path = tmp_path / "kueue.yaml"
    pipeline_main(
        ["compile", "--queue-name", "team-a-gpu", "--priority-class", "high",
         "--gpu-resource", "nvidia.com/mig-1g.10gb", "--output", str(path)]
    )  # fmt: skip
    spec, platform = yaml.safe_load_all(path.read_text())
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    labelled = {
        name: e["podMetadata"]["labels"] for name, e in executors.items() if "podMetadata" in e
    }
    assert labelled == {
        "exec-train-op": {
            "kueue.x-k8s.io/queue-name": "team-a-gpu",
            "kueue.x-k8s.io/priority-class": "high",
        }
    }
    train = spec["deploymentSpec"]["executors"]["exec-train-op"]["container"]["resources"]
    assert train["accelerator"]["resourceType"] == "nvidia.com/mig-1g.10gb"
