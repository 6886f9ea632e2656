"""The KFP layer: the compiled spec, the real kfp CLI against a local API, a kfp.local run."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from mlflow.tracking import MlflowClient

from components import register
from components.cluster.placement import Placement
from pipeline.__main__ import main as pipeline_main
from tests.kfp_api import FakeKfpApi

IMAGE = "registry.example/dogs-vs-cats@sha256:" + "a" * 64
GPU_IMAGE = "registry.example/dogs-vs-cats-cuda@sha256:" + "b" * 64
PLANTED = {"AWS_SECRET_ACCESS_KEY": "planted-aws-secret", "MLFLOW_TRACKING_PASSWORD": "planted-pw"}


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    path = tmp_path_factory.mktemp("spec") / "pipeline.yaml"
    with pytest.MonkeyPatch.context() as patch:
        for key, value in PLANTED.items():
            patch.setenv(key, value)
        pipeline_main(
            ["compile", "--output", str(path), "--image", IMAGE, "--gpu-image", GPU_IMAGE]
        )
    text = path.read_text()
    spec, platform = yaml.safe_load_all(text)
    return path, text, spec, platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]


def executor(spec, name):
    return spec["deploymentSpec"]["executors"][f"exec-{name}"]["container"]


def task(spec, name):
    return spec["root"]["dag"]["tasks"][name]


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
    assert train["nodeSelector"]["labels"] == dict([Placement().node_label])
    assert train["emptyDirMounts"] == [
        {
            "volumeName": "dshm",
            "mountPath": "/dev/shm",
            "medium": "Memory",
            "sizeLimit": Placement().shm_size,
        }
    ]


def test_compiling_with_image_tags_warns_and_digests_do_not(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        pipeline_main(["compile", "--output", str(tmp_path / "tags.yaml")])
    assert caplog.text.count("is a tag, not a digest") == 2
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        pipeline_main(
            [
                *("compile", "--output", str(tmp_path / "digests.yaml")),
                *("--image", IMAGE, "--gpu-image", GPU_IMAGE),
            ]
        )
    assert "not a digest" not in caplog.text


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
    assert launcher["gpu_image"]["runtimeValue"]["constant"] == GPU_IMAGE
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


def test_kfp_run_submit_sends_the_spec_and_parameters_intact(compiled):
    path, _, spec, _ = compiled
    kfp_cli = shutil.which("kfp") or pytest.fail("the kfp CLI is not on PATH")
    with FakeKfpApi() as api:
        done = subprocess.run(
            [
                kfp_cli,
                "--endpoint",
                api.endpoint,
                "run",
                "submit",
                "-e",
                "dogs-vs-cats",
                "-f",
                str(path),
                "epochs=10",
                "model=bn_cnn",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert api.unknown == []
        (run,) = api.runs.values()
    assert run["runtime_config"]["parameters"] == {"epochs": 10, "model": "bn_cnn"}
    assert run["pipeline_spec"]["pipeline_spec"] == spec
    assert run["experiment_id"] == "exp-1" and "run-1" in done.stdout


def test_python_submit_converts_parameter_types(capsys):
    with FakeKfpApi() as api:
        pipeline_main(["submit", "--host", api.endpoint, "epochs=3", "lr=0.01", "channels=3"])
        (run,) = api.runs.values()
    assert run["runtime_config"]["parameters"] == {"epochs": 3, "lr": 0.01, "channels": 3}
    assert "submitted run run-1" in capsys.readouterr().out


def test_an_unreachable_kfp_api_is_one_line_that_says_what_was_tried():
    from tests.servers import free_port

    host = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SystemExit) as stopped:
        pipeline_main(["submit", "--host", host, "epochs=3"])
    message = str(stopped.value)
    assert message.startswith(f"cannot reach the Kubeflow Pipelines API at {host}")
    assert "ConnectionError" in message and "\n" not in message


def test_help_lists_subcommands_and_the_pipelines_parameters(capsys):
    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit):
            pipeline_main(argv)
    top, run = capsys.readouterr().out.split("usage: python -m pipeline run", 1)
    assert "write the pipeline spec for a cluster" in top and "kfp.local" in top
    assert "epochs=10" in run and "min_accuracy=0.85" in run
    assert "[--local]" in run  # shown as the option it is, not as required


def test_unknown_parameter_lists_the_valid_ones():
    with pytest.raises(SystemExit, match="expected name=value with a name among: source"):
        pipeline_main(["submit", "--host", "http://127.0.0.1:9", "epoch=3"])


def test_quality_gate_refuses_a_weak_model_and_says_why(
    sample_arrays, tmp_path, mlflow_store, capsys
):
    from components.training import session
    from components.training.config import TrainConfig

    result = session.train(
        TrainConfig(data=str(sample_arrays), output=str(tmp_path / "m"), epochs=1, dry_run=True)
    )
    register.main(
        [
            *("--mlflow-run-id", result.run_id, "--test-accuracy", "0.61"),
            *("--min-accuracy", "0.9", "--registered-model-name", "pets"),
        ]
    )
    reason = capsys.readouterr().out.strip()
    assert reason == "not registered: test accuracy 0.6100 < minimum 0.9000"
    client = MlflowClient(mlflow_store)
    assert client.get_run(result.run_id).data.tags["quality_gate"] == reason
    assert client.search_registered_models() == []


def test_quality_gate_registers_the_logged_model_by_its_id(
    sample_arrays, tmp_path, mlflow_store, caplog
):
    from components.training import session
    from components.training.config import TrainConfig

    result = session.train(
        TrainConfig(data=str(sample_arrays), output=str(tmp_path / "m"), epochs=1, dry_run=True)
    )
    with caplog.at_level(logging.WARNING):
        decision = register.register_if_accurate(
            register.RegisterConfig(mlflow_run_id=result.run_id, test_accuracy=0.9)
        )
    assert decision.registered and decision.version == "1"
    client = MlflowClient(mlflow_store)
    version = client.get_model_version_by_alias("dogs-vs-cats", "candidate")
    assert version.source == result.model_uri  # models:/m-…, the logged model itself
    assert version.run_id == result.run_id
    assert "registering model based on" not in caplog.text  # MLflow's runs:/ fallback


@pytest.mark.integration
@pytest.mark.slow
def test_whole_pipeline_runs_locally_and_registers_a_good_enough_model(sample_zip, tmp_path):
    workdir = tmp_path / "local"
    team_store = f"sqlite:///{tmp_path / 'team.db'}"  # a team's store, from the environment
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline",
            "run",
            "--local",
            "--source",
            str(sample_zip),
            "--workdir",
            str(workdir),
            "epochs=1",
            "image_size=40",
            "min_accuracy=0.0",
        ],
        cwd=tmp_path,  # where MLflow puts a SQLite store's artifacts (./mlruns)
        env={**os.environ, "MLFLOW_TRACKING_URI": team_store},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-5000:]
    assert not (workdir / "mlflow.db").exists()
    # a short account on the screen: a line as each task starts and ends, then the summary
    tasks = ["download-op", "preprocess-op", "train-op", "evaluate-op", "register-op"]
    for task in tasks:
        assert re.search(rf"^  {task} +started$", done.stdout, re.MULTILINE), task
        assert re.search(rf"^  {task} +success in [\d.]+ s$", done.stdout, re.MULTILINE), task
    assert len(done.stdout.splitlines()) <= 2 * len(tasks) + 10 and done.stderr == ""
    log = re.search(r"^log: +(\S+)$", done.stdout, re.MULTILINE).group(1)
    assert "Executing task" in Path(log).read_text()  # everything kfp.local printed is kept
    run_id = re.search(r"^MLflow run: +(\w+)", done.stdout, re.MULTILINE).group(1)
    assert (workdir / "outputs").is_dir() and "mlflow ui --backend-store-uri" in done.stdout
    run_dir = next((workdir / "outputs").iterdir())
    for produced in (
        "download-op/dataset/download.json",
        "preprocess-op/arrays/meta.json",
        "train-op/model/model.pt",
        "evaluate-op/evaluation/confusion_matrix.png",
        "evaluate-op/report",
    ):
        assert (run_dir / produced).exists(), produced
    client = MlflowClient(team_store)
    run = client.get_run(run_id)
    assert 0.0 <= run.data.metrics["test_accuracy"] <= 1.0
    assert run.data.tags["kfp.pipeline_name"] == "dogs-vs-cats" and run.data.tags["kfp.run_id"]
    version = client.get_model_version_by_alias("dogs-vs-cats", "candidate")
    assert version.run_id == run_id
    assert run.data.tags["quality_gate"].startswith("registered dogs-vs-cats version 1")


def test_a_failed_local_run_ends_in_one_line_naming_the_task_and_its_error(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pipeline", "run", "--local", "--workdir", str(tmp_path / "w")]
        + ["--source", str(tmp_path / "missing.zip")],
        cwd=tmp_path,
        env={**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path / 'team.db'}"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1
    assert re.search(r"^  download-op +failure in [\d.]+ s$", done.stdout, re.MULTILINE)
    (error,) = done.stderr.splitlines()
    assert error.startswith("the local run failed at download-op: ") and "missing.zip" in error
    assert re.search(r"; full log: \S+\.log$", error)


def test_a_local_run_logs_where_mlflow_tracking_uri_says_else_beside_its_outputs(
    tmp_path, monkeypatch
):
    from pipeline.local import default_tracking_uri

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert default_tracking_uri(tmp_path) == f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow.team.example:5000")
    assert default_tracking_uri(tmp_path) == "http://mlflow.team.example:5000"


def test_preset_expands_into_parameters_that_pairs_override():
    from pipeline.__main__ import parse_arguments
    from pipeline.pipeline import build_pipeline

    arguments = parse_arguments(["epochs=2"], build_pipeline(), preset="accurate")
    assert arguments["model"] == "resnet18" and arguments["image_size"] == 128
    assert arguments["channels"] == 3 and arguments["epochs"] == 2
    assert arguments["min_crop_area"] == 0.25 and arguments["label_smoothing"] == 0.1
    assert arguments["min_accuracy"] == 0.93  # each preset's own gate
    tutorial = parse_arguments(["min_accuracy=0.5"], build_pipeline(), preset="tutorial")
    assert tutorial["model"] == "compact_cnn" and tutorial["min_accuracy"] == 0.5
    cpu = parse_arguments(["mirror_average=false"], build_pipeline(), preset="cpu")
    assert cpu["channels"] == 3 and cpu["epochs"] == 17 and cpu["min_accuracy"] == 0.9
    assert cpu["mirror_average"] is False  # a bool recipe setting, overridden by a pair


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        (["epochs=abc"], "expected epochs to be int, found 'abc'"),
        (["augment=maybe"], "expected augment to be bool, found 'maybe'"),
        (["epochs=0"], "starts: expected epochs >= 1"),
        (["lr=nan"], "finite lr > 0, found 10, 100 and nan"),
        (["val_fraction=0.5", "test_fraction=0.5"], "sum to less than 1, found val=0.5"),
        (["min_accuracy=93"], "accuracy from 0 to 1, found 93.0"),
        (["gpus=0"], "1 or more GPUs for the train task, found 0"),
        (["sha256=abc"], "sha256 of 64 hex digits"),
        (["image_size=1000"], "image size from 8 to 512, found 1000"),
    ],
)
def test_bad_pipeline_arguments_are_refused_before_the_run_starts(pairs, message):
    from pipeline.__main__ import parse_arguments
    from pipeline.pipeline import build_pipeline

    with pytest.raises(SystemExit, match=message):
        parse_arguments(pairs, build_pipeline())


def test_the_sweep_compiles_to_a_parallel_for_of_train_and_evaluate_then_one_gate(tmp_path):
    path = tmp_path / "sweep.yaml"
    pipeline_main(["compile", "--sweep", "--output", str(path), "--image", IMAGE])
    spec, platform = yaml.safe_load_all(path.read_text())
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
    # the gate judges the best child only
    gate = root["dag"]["tasks"]["register-op"]["inputs"]["parameters"]
    assert gate["mlflow_run_id"]["taskOutputParameter"]["producerTask"] == "sweep-best-op"
    executors = platform["platforms"]["kubernetes"]["deploymentSpec"]["executors"]
    assert executors["exec-train-op"]["tolerations"][0]["key"] == "nvidia.com/gpu"


def test_sweep_pairs_become_a_grid_and_a_bad_combination_is_refused_before_running():
    from pipeline.__main__ import sweep_arguments
    from pipeline.pipeline import build_pipeline

    pipeline = build_pipeline(sweep=True)
    arguments = sweep_arguments(
        ["lr=0.001,0.003", "model=tutorial_cnn,bn_cnn", "epochs=2"], pipeline
    )
    assert arguments["epochs"] == 2 and len(arguments["grid"]) == 4
    assert json.loads(arguments["grid"][0]) == {"lr": 0.001, "model": "tutorial_cnn"}
    with pytest.raises(SystemExit, match="refused: unknown model 'vgg'"):
        sweep_arguments(["model=tutorial_cnn,vgg"], pipeline)
    with pytest.raises(SystemExit, match="expected a sweep over training recipe settings"):
        sweep_arguments(["image_size=40,64"], pipeline)
    with pytest.raises(SystemExit, match="expected at least one name=v1,v2 pair"):
        sweep_arguments(["lr=0.001"], pipeline)
    seeds, rates = ",".join(map(str, range(100))), ",".join(f"0.00{i}" for i in range(1, 10))
    with pytest.raises(
        SystemExit, match="at most 1000 training runs, found 100 seed × 9 lr × 2 epochs = 1800"
    ):
        sweep_arguments([f"seed={seeds}", f"lr={rates}", "epochs=1,2"], pipeline)
