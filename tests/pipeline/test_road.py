"""One preset, one road: each preset's train task, TrainJob and search trials run its
hardware's image with its resources and node placement, read from what each command
writes (pipeline.road gives the flags over the preset)."""

from __future__ import annotations

import json

import pytest
import yaml
from kubernetes.utils import parse_quantity

from components.cluster import trainjob
from components.cluster.placement import Placement
from components.recipes.presets import ON_GPU, PRESETS
from components.recipes.recipe import placement_of, recipe_values
from components.training.config import TrainConfig
from pipeline.__main__ import main as pipeline_main
from tests.pipeline.conftest import GPU_IMAGE, IMAGE, executor, task

IMAGES = ("--image", IMAGE, "--gpu-image", GPU_IMAGE)


def compile_spec(tmp_path, *flags: str) -> tuple[dict, dict]:
    path = tmp_path / "pipeline.yaml"
    pipeline_main(["compile", "--output", str(path), *IMAGES, *flags])
    spec, platform = yaml.safe_load_all(path.read_text())
    return spec, platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def constant(spec: dict, task_name: str, name: str):
    return task(spec, task_name)["inputs"]["parameters"][name]["runtimeValue"]["constant"]


def quantity(value) -> float:
    return float(parse_quantity(str(value)))


@pytest.mark.parametrize("preset", PRESETS)
def test_a_presets_train_task_runs_its_hardwares_image_resources_and_placement(preset, tmp_path):
    place = placement_of(recipe_values(preset), {})
    spec, platform = compile_spec(tmp_path, "--preset", preset)
    container = executor(spec, "train-op")
    assert container["image"] == (GPU_IMAGE if place.on_gpu else IMAGE)
    resources = container["resources"]
    assert quantity(resources["resourceCpuRequest"]) == quantity(place.cpu)
    assert quantity(resources["resourceMemoryRequest"]) == quantity(place.memory)
    if place.on_gpu:
        assert resources["accelerator"]["resourceType"] == place.gpu_resource
    else:
        assert "accelerator" not in resources  # a CPU preset asks for no GPU
        assert constant(spec, "train-op", "gpus") == 1  # and trains in one process
    train = platform["exec-train-op"]
    assert train.get("nodeSelector", {}).get("labels") == (
        dict([place.node_label]) if place.node_label else None
    )
    tolerated = [toleration["key"] for toleration in train.get("tolerations", [])]
    assert tolerated == ([place.toleration_key] if place.toleration_key else [])
    assert train["emptyDirMounts"][0]["sizeLimit"] == place.shm_size
    defaults = spec["root"]["inputDefinitions"]["parameters"]
    assert defaults["model"]["defaultValue"] == PRESETS[preset]["model"]


def test_the_cpu_preset_asks_for_no_gpu_and_no_gpu_node():
    place = placement_of(recipe_values("cpu"), {})
    assert (place.hardware, place.node_selector, place.toleration_key) == ("cpu", "", "")


@pytest.mark.parametrize("preset", PRESETS)
def test_a_presets_trainjob_runs_its_hardwares_image_resources_and_placement(preset, tmp_path):
    place = placement_of(recipe_values(preset), {})
    spec, _ = compile_spec(tmp_path, "--preset", preset, "--nodes", "2")
    image = constant(spec, "trainjob-op", "image")
    assert image == (GPU_IMAGE if place.on_gpu else IMAGE)
    placement = Placement.from_json(constant(spec, "trainjob-op", "placement"))
    assert placement == place
    job = trainjob.ClusterJob(  # as the launcher builds it from those inputs
        name="dvc-run",
        namespace="team-a",
        image=image,
        nodes=2,
        gpus_per_node=1,
        tracking_uri="http://mlflow.mlflow.svc.cluster.local:5000",
        shared_pvc="dogs-vs-cats-shared",
        placement=placement,
    )
    manifest = trainjob.build_trainjob(TrainConfig(data="/d", output="/o"), job).to_dict()
    requests = manifest["spec"]["trainer"]["resourcesPerNode"]["requests"]
    assert (place.gpu_resource in requests) == place.on_gpu
    assert quantity(requests["cpu"]) == quantity(place.cpu)
    (patch,) = manifest["spec"]["runtimePatches"]
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = replicated["template"]["spec"]["template"]["spec"]
    assert pod.get("nodeSelector") == (dict([place.node_label]) if place.node_label else None)
    assert bool(pod.get("tolerations")) == bool(place.toleration_key)


@pytest.mark.parametrize("preset", PRESETS)
def test_a_presets_search_trials_run_its_hardwares_image_resources_and_placement(
    preset, tmp_path, capsys
):
    place = placement_of(recipe_values(preset), {})
    output = tmp_path / "experiment.yaml"
    pipeline_main(
        [
            *("tune", "--output", str(output), "--preset", preset, "--trials", "4"),
            *("--gpu-image", GPU_IMAGE, "--cpu-image", IMAGE),
        ]
    )
    experiment = yaml.safe_load(output.read_text())
    pod = experiment["spec"]["trialTemplate"]["trialSpec"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == (GPU_IMAGE if place.on_gpu else IMAGE)
    requests = container["resources"]["requests"]
    assert (place.gpu_resource in requests) == place.on_gpu
    assert quantity(requests["memory"]) == quantity(place.memory)
    assert pod.get("nodeSelector") == (dict([place.node_label]) if place.node_label else None)
    assert bool(pod.get("tolerations")) == bool(place.toleration_key)
    assert f"on {place.hardware.upper()} nodes" in capsys.readouterr().out


def test_a_flag_over_the_preset_moves_the_train_task(tmp_path):
    spec, platform = compile_spec(tmp_path, "--preset", "pretrained", "--hardware", "gpu")
    assert executor(spec, "train-op")["image"] == GPU_IMAGE
    assert platform["exec-train-op"]["nodeSelector"]["labels"] == dict(
        [Placement(**ON_GPU).node_label]
    )
    spec, platform = compile_spec(tmp_path, "--preset", "accurate", "--hardware", "cpu")
    assert "accelerator" not in executor(spec, "train-op")["resources"]
    assert "nodeSelector" not in platform["exec-train-op"]


def test_a_recipe_file_compiles_as_the_preset_it_names_with_its_own_settings(tmp_path):
    recipe = tmp_path / "team.yaml"
    recipe.write_text("preset: cpu\nepochs: 12\nmemory: 6Gi\nqueue_name: team-a-cpu\n")
    spec, platform = compile_spec(tmp_path, "--preset", str(recipe))
    assert spec["root"]["inputDefinitions"]["parameters"]["epochs"]["defaultValue"] == 12
    resources = executor(spec, "train-op")["resources"]
    assert resources["resourceMemoryRequest"] == "6Gi" and "accelerator" not in resources
    labels = platform["exec-train-op"]["podMetadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "team-a-cpu"


def test_a_bad_recipe_file_stops_compile_in_one_line_naming_the_field(tmp_path, capsys):
    recipe = tmp_path / "team.yaml"
    recipe.write_text(json.dumps({"preset": "cpu", "hardwre": "gpu"}))
    with pytest.raises(SystemExit):
        compile_spec(tmp_path, "--preset", str(recipe))
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "unknown setting 'hardwre': did you mean hardware?" in error


def test_a_recipe_file_of_epochs_alone_compiles_onto_no_gpu_node(tmp_path):
    recipe = tmp_path / "short.yaml"
    recipe.write_text("epochs: 2\n")
    spec, platform = compile_spec(tmp_path, "--preset", str(recipe))
    assert executor(spec, "train-op")["image"] == IMAGE  # the CPU image, not the CUDA one
    assert "accelerator" not in executor(spec, "train-op")["resources"]
    assert "nodeSelector" not in platform["exec-train-op"]
    assert "tolerations" not in platform["exec-train-op"]
    parameters = spec["root"]["inputDefinitions"]["parameters"]
    assert "gpus" not in parameters and parameters["epochs"]["defaultValue"] == 2


def test_the_recipe_is_read_once_a_command(tmp_path, monkeypatch):
    from components.recipes import recipe as recipes

    recipe = tmp_path / "short.yaml"
    recipe.write_text("preset: cpu\nepochs: 2\n")
    reads = []
    monkeypatch.setattr(recipes, "read_mapping", lambda path: reads.append(path) or {
        "preset": "cpu", "epochs": 2})  # fmt: skip
    compile_spec(tmp_path, "--preset", str(recipe))
    assert reads == [recipe]
    with pytest.raises(SystemExit, match="deploy=true needs KServe"):  # after every check
        pipeline_main(["run", "--local", "--preset", str(recipe), "deploy=true"])
    assert reads == [recipe, recipe]
