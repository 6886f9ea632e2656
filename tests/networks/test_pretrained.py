"""Pretrained weights: from the installed package only, checked by digest before unpickling,
and rebuilt by a net that computes what the weights were trained to compute."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle

import numpy as np
import pytest
import torch

from components.data.images import decode_file
from components.networks import pretrained
from components.networks.efficientnet_lite import EfficientNetLite
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


def test_the_net_has_every_pretrained_tensor_under_its_name_and_shape():
    state = installed_weights()
    net = build_model("efficientnet_lite0", 3, 192)
    own = {name: tuple(t.shape) for name, t in net.state_dict().items()}
    theirs = {name: tuple(t.shape) for name, t in state.items()}
    assert len(theirs) == 296
    assert {k: v for k, v in own.items() if not k.startswith("_fc.")} == {
        k: v for k, v in theirs.items() if not k.startswith("_fc.")
    }


def test_the_rebuilt_net_tells_imagenets_dogs_from_its_cats_on_real_photos(sample_images):
    """Zero-shot, with ImageNet's own 1,000-class layer: the padding, batch-norm eps and
    input scaling are the weights' own, or these real photos come out near chance."""
    net = EfficientNetLite(3)
    net._fc = torch.nn.Linear(1280, 1000)
    net.load_state_dict(installed_weights())
    correct = 0
    for label, kind in enumerate(("Cat", "Dog")):
        paths = [sample_images / "PetImages" / kind / f"{n}.jpg" for n in range(30)]
        pixels = torch.from_numpy(np.stack([decode_file(p, 192, 3).pixels for p in paths]))
        with torch.no_grad():
            probabilities = net.eval()((pixels.float() - 127) / 128).softmax(1)
        dog = probabilities[:, IMAGENET_DOGS].sum(1) > probabilities[:, IMAGENET_CATS].sum(1)
        correct += int((dog == bool(label)).sum())
    assert correct / 60 >= 0.8  # 0.88 on 2,000 unseen photos at 224 pixels


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


def test_frozen_blocks_take_no_gradient_and_keep_their_statistics():
    net = build_model("efficientnet_lite0", 3, 64)
    assert isinstance(net, EfficientNetLite)
    net.freeze(16)
    net.train()
    before = net._blocks[15]._bn2.running_mean.clone()
    net(torch.rand(4, 3, 64, 64)).sum().backward()
    assert torch.equal(net._blocks[15]._bn2.running_mean, before)
    assert all(p.grad is None for p in net._blocks.parameters())
    assert net._conv_head.weight.grad is not None and net._bn1.training


def test_frozen_blocks_beyond_the_net_are_refused():
    net = build_model("efficientnet_lite0", 3, 64)
    assert isinstance(net, EfficientNetLite)
    with pytest.raises(ValueError, match="expected 0 to 16 frozen blocks .* found 17"):
        net.freeze(17)


def test_the_run_records_the_installed_files_digest():
    recorded = pretrained.record("efficientnet_lite0")
    path = pretrained.weights_path(LITE0)
    assert recorded["backbone_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert recorded["backbone_package"] == LITE0.package
    assert recorded["backbone_version"] == "0.1.0" and recorded["backbone_license"] == "Apache-2.0"
