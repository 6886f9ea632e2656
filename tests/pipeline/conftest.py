"""What the pipeline tests share: a spec compiled once, pinned images, planted secrets."""

from __future__ import annotations

import pytest
import yaml

from pipeline.__main__ import main as pipeline_main

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


@pytest.fixture(scope="module")
def compiled_sweep(tmp_path_factory) -> tuple[dict, dict]:
    """The sweep pipeline's spec and its Kubernetes platform config, compiled once a module."""
    path = tmp_path_factory.mktemp("spec") / "sweep.yaml"
    pipeline_main(["compile", "--sweep", "--output", str(path), "--image", IMAGE])
    spec, platform = yaml.safe_load_all(path.read_text())
    return spec, platform


def executor(spec, name):
    return spec["deploymentSpec"]["executors"][f"exec-{name}"]["container"]


def task(spec, name):
    return spec["root"]["dag"]["tasks"][name]
