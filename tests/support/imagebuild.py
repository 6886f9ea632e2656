"""Build the steps' image with buildah, daemonless, and run kfp.local's tasks inside it.

No Docker engine and no registry are reachable here, so: the slim Python base is stood in
for by Debian bookworm bootstrapped with debootstrap (``tests/python-standin.Dockerfile``),
``images/Dockerfile`` is built on it through its ``BASE_IMAGE`` argument, and kfp.local's
Docker task handler is swapped for one that runs each task with ``buildah run`` in a
container of the built image, as the image's own (non-root) user, with the pipeline root
mounted at the same path, as kfp's DockerRunner mounts it.

buildah's vfs driver (the one that works without kernel overlay support) copies the whole
7 GB image for every layer and every container: the build commits one layer (no
``--layers`` cache) and one container serves every task. Images live in their own store
(``IMAGE_TEST_STORAGE``, default below); the stand-in base is kept there between runs.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kfp.local import docker_task_handler, status

from tests.conftest import REPO

STORAGE_ROOT = Path(os.environ.get("IMAGE_TEST_STORAGE", "/var/tmp/dogs-vs-cats-image-test"))
STORAGE = [
    "--storage-driver=vfs",
    f"--root={STORAGE_ROOT / 'storage'}",
    f"--runroot={STORAGE_ROOT / 'run'}",
]
BASE = "localhost/python-standin:3.11-bookworm"
IMAGE = "localhost/dogs-vs-cats:image-test"
DEBIAN_MIRROR = "http://deb.debian.org/debian"


def buildah(*args: str, timeout: float = 1800) -> str:
    """Run ``buildah`` on the test's store; its stdout. Raises with buildah's own error."""
    done = subprocess.run(
        ["buildah", *STORAGE, *args], capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise RuntimeError(f"buildah {' '.join(args[:2])} failed:\n{done.stderr[-4000:]}")
    return done.stdout


def image_exists(name: str) -> bool:
    return (
        subprocess.run(
            ["buildah", *STORAGE, "inspect", "--type=image", name], capture_output=True
        ).returncode
        == 0
    )


def build_standin_base() -> str:
    """The slim Python base's stand-in, bootstrapped once and then kept in the store."""
    if image_exists(BASE):
        return BASE
    with tempfile.TemporaryDirectory(dir="/var/tmp") as work:
        rootfs = Path(work) / "rootfs"
        subprocess.run(
            ["debootstrap", "--variant=minbase", "--include=python3,python3-venv"]
            + ["bookworm", str(rootfs), DEBIAN_MIRROR],
            check=True,
            capture_output=True,
            timeout=900,
        )
        subprocess.run(["tar", "-C", str(rootfs), "-cf", f"{work}/rootfs.tar", "."], check=True)
        shutil.copy(REPO / "tests/python-standin.Dockerfile", Path(work) / "Dockerfile")
        buildah("build", "--isolation=chroot", f"--tag={BASE}", work)
    return BASE


def build_image() -> str:
    """``images/Dockerfile`` built on the stand-in base, with PyPI's torch (see below)."""
    base = build_standin_base()
    buildah(
        "build",
        "--isolation=chroot",
        "--format=docker",  # as Docker builds it: OCI images have no SHELL instruction
        *(f"--volume={path}:{path}:ro" for path in pip_configuration()),
        f"--build-arg=BASE_IMAGE={base}",
        # PyTorch's CPU wheel index (the CPU image's) is not reachable from these machines:
        # the build takes PyPI's torch, the CUDA image's, which runs the CPU steps alike.
        "--build-arg=TORCH_INDEX_URL=",
        "--file=images/Dockerfile",
        f"--tag={IMAGE}",
        str(REPO),
    )
    return IMAGE


def pip_configuration() -> list[str]:
    """pip's machine-wide config files here and the files they name (its CA bundle, say).

    Mounted read-only into the build's ``RUN`` steps, not into the image: this machine
    reaches PyPI through a TLS-inspecting proxy whose CA only its own bundle holds.
    """
    debug = subprocess.run(
        ["pip", "config", "debug"], capture_output=True, text=True, check=True
    ).stdout
    section, paths = "", set()
    for line in debug.splitlines():
        text = line.strip()
        if not line.startswith(" "):
            section = text.rstrip(":")
        elif section == "global" and text.endswith("exists: True"):
            paths.add(text.split(",")[0])
        elif section == "global" and ": " in text:
            paths.add(text.split(": ", 1)[1])
    return sorted(path for path in paths if path.startswith("/") and Path(path).exists())


class BuildahTaskHandler(docker_task_handler.DockerTaskHandler):
    """kfp.local's Docker task handler, with ``buildah run`` in place of a Docker engine."""

    container = ""  # a working container of the built image (``buildah from``)
    read_only: tuple[Path, ...] = ()  # host paths the tasks read, mounted at the same path

    def run(self) -> status.Status:
        done = subprocess.run(
            ["buildah", *STORAGE, "run", "--isolation=chroot"]
            + [f"--volume={self.pipeline_root}:{self.pipeline_root}"]
            + [f"--volume={path}:{path}:ro" for path in self.read_only]
            + [f"--env={name}={value}" for name, value in self.env_vars.items()]
            + [self.container, "--", *self.full_command],
            timeout=1800,
        )
        return status.Status.SUCCESS if done.returncode == 0 else status.Status.FAILURE
