"""The steps' image, built with buildah, runs every task of the pipeline as its own user.

Marked ``image``: left out of the default run (the build reaches Debian's mirror and PyPI
and takes minutes; ``make image-test`` runs it), skipped where buildah or debootstrap is
missing. What stands in for what, and why, is in ``tests/support/imagebuild.py``: the base image
(no registry here) and the Docker engine (none here), nothing of the image itself.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator

import pytest
from kfp import local
from kfp.local import docker_task_handler

from components.core.names import DEFAULT_EXPERIMENT
from components.tracking import run_log
from components.tracking.store import ensure_experiment, use_tracking_uri
from pipeline.pipeline import build_pipeline
from pipeline.target import ClusterTarget
from tests.support import imagebuild

pytestmark = [pytest.mark.image, pytest.mark.slow]
APP_UID = 10001  # images/Dockerfile's USER
TASKS = ("download-op", "preprocess-op", "train-op", "evaluate-op", "register-op")


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    missing = [tool for tool in ("buildah", "debootstrap") if not shutil.which(tool)]
    if missing:
        pytest.skip(f"needs {' and '.join(missing)} (Debian packages) to build the image")
    image = imagebuild.build_image()
    yield image
    imagebuild.buildah("rmi", image)  # 7 GB


@pytest.fixture(scope="module")
def container(image) -> Iterator[str]:
    """A working container of the image; removed with everything written in it."""
    container = imagebuild.buildah("from", "--pull-never", image).strip()
    yield container
    imagebuild.buildah("rm", container)


def test_the_image_runs_as_its_own_non_root_user_and_has_every_step(image, container):
    config = json.loads(imagebuild.buildah("inspect", "--type=image", image))["Docker"]["config"]
    assert config["User"] == f"{APP_UID}:{APP_UID}"
    assert config["Entrypoint"] == ["python", "-m"]
    probe = (
        "import os, importlib\n"
        "for step in ('download', 'preprocess', 'train', 'evaluate', 'register', 'serve',\n"
        "             'deploy'):\n"
        "    importlib.import_module('components.' + step)\n"
        "import torch, mlflow, kfp, kserve\n"
        "print(os.getuid(), os.access('/app', os.W_OK), os.access('/home/app', os.W_OK))"
    )
    shown = imagebuild.buildah("run", "--isolation=chroot", container, "--", "python", "-c", probe)
    assert shown.split() == [str(APP_UID), "False", "True"]  # its code read-only to itself


# the tasks' requests and limits are the cluster's; kfp.local says it ignores them
@pytest.mark.filterwarnings("ignore:Task .* have no effect in the current local runner")
def test_every_task_of_the_pipeline_runs_in_the_image(
    image, container, sample_zip, tmp_path, monkeypatch
):
    """kfp.local runs the compiled tasks, each with ``buildah run`` in the built image."""
    root = tmp_path / "root"  # kfp mounts the pipeline root into each task's container
    root.mkdir()
    store = f"sqlite:///{root / 'mlflow.db'}"
    use_tracking_uri(store)
    ensure_experiment(DEFAULT_EXPERIMENT, root / "mlartifacts")
    shutil.chown(root, APP_UID, APP_UID)
    shutil.chown(root / "mlflow.db", APP_UID, APP_UID)
    monkeypatch.setattr(docker_task_handler, "DockerTaskHandler", imagebuild.BuildahTaskHandler)
    monkeypatch.setattr(imagebuild.BuildahTaskHandler, "container", container)
    monkeypatch.setattr(imagebuild.BuildahTaskHandler, "read_only", (sample_zip.parent,))
    local.init(runner=local.DockerRunner(), pipeline_root=str(root))
    settings = ClusterTarget(image=image, gpu_image=image, train_retries=0)
    pipeline = build_pipeline(settings)

    outputs = pipeline(
        source=str(sample_zip), tracking_uri=store, epochs=1, image_size=40, min_accuracy=0.0
    ).outputs

    assert 0.5 < outputs["test_accuracy"] <= 1.0
    assert outputs["registration"].startswith("registered")
    (run_dir,) = [path for path in root.iterdir() if (path / "train-op").is_dir()]
    for task in TASKS:
        written = [path for path in (run_dir / task).rglob("*") if path.is_file()]
        assert written, task
        # every file a task wrote belongs to the image's user: no task ran as root
        assert {path.stat().st_uid for path in written} == {APP_UID}, task
    assert (run_dir / "train-op/trained_model/model.pt").is_file()
    logged = run_log.run_metrics(outputs["mlflow_run_id"])
    assert logged["test_accuracy"] == pytest.approx(outputs["test_accuracy"])


def test_the_image_serves_the_registered_model_as_the_inference_service_runs_it(
    container, running_server, small_arrays, sample_images, tmp_path
):
    """components.serve in the image, started with the InferenceService's own command and
    environment after the storage initializer (the image's components.fetch_model) fetched
    the registered version through the tracking server (on PostgreSQL, artifacts in
    SeaweedFS), scores with ONNX Runtime and answers a photo."""
    import base64
    import re
    import subprocess
    import time

    import requests

    from components.deploying import inference_service
    from components.deploying.config import DeployConfig
    from tests.support.servers import free_port, stop_process_group
    from tests.support.tracking_stack import register_trained_model

    name = "dogs-vs-cats-image-test"
    register_trained_model(running_server.url, small_arrays, tmp_path, name)
    cfg = DeployConfig(
        model_version="1",
        registered_model_name=name,
        tracking_uri=running_server.url,
        image="dogs-vs-cats-under-test:0.1.0",
    )
    (spec,) = inference_service.manifest(inference_service.build(cfg))["spec"]["predictor"][
        "containers"
    ]
    env = {e["name"]: e["value"] for e in spec["env"] if "value" in e}  # secrets: absent
    # KServe's storage initializer, as manifests/serving-storage declares it: the image's
    # components.fetch_model with STORAGE_URI and /mnt/models, before the server starts
    models = tmp_path / "mnt-models"
    models.mkdir()
    models.chmod(0o777)  # written by the image's own user
    mount = f"--volume={models}:/mnt/models"
    imagebuild.buildah(
        "run", "--isolation=chroot", mount, f"--env=MLFLOW_TRACKING_URI={running_server.url}",
        f"--user={APP_UID}", container, "--",
        "python", "-m", "components.fetch_model", env[inference_service.STORAGE_URI], "/mnt/models",
    )  # fmt: skip
    # KServe points STORAGE_URI at the fetched folder; Kubernetes expands $(VAR) in args
    env[inference_service.STORAGE_URI] = "/mnt/models"
    args = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], arg) for arg in spec["args"]]
    port = free_port()  # this machine's 8080 may be taken: the last --port wins
    command = [*spec["command"], *args, "--host=127.0.0.1", f"--port={port}"]
    with open(tmp_path / "serve.log", "wb") as log:
        server = subprocess.Popen(
            ["buildah", *imagebuild.STORAGE, "run", "--isolation=chroot", mount]
            + [f"--env={name}={value}" for name, value in env.items()]
            + [f"--user={APP_UID}", container, "--", *command],
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    try:
        url = f"http://127.0.0.1:{port}{spec['readinessProbe']['httpGet']['path']}"
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert server.poll() is None, (tmp_path / "serve.log").read_text()[-3000:]
            try:
                if requests.get(url, timeout=5).ok:
                    break
            except requests.RequestException:
                time.sleep(0.5)
        photo = next((sample_images / "PetImages/Dog").glob("*.jpg")).read_bytes()
        body = {"instances": [{"image": {"b64": base64.b64encode(photo).decode()}}]}
        answer = requests.post(f"{url}:predict", json=body, timeout=60)
        assert answer.status_code == 200, (tmp_path / "serve.log").read_text()[-3000:]
        assert answer.json()["predictions"][0]["class"] in ("cat", "dog")
        served = (tmp_path / "serve.log").read_text()
        assert "scoring with ONNX Runtime (model.onnx, sha256 " in served
    finally:
        stop_process_group(server)
