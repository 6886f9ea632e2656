"""EfficientNet-Lite0 rebuilt in plain torch: the published weights' names and shapes,
TensorFlow's SAME padding, and the function the weights were trained to compute."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from components.data.images import decode_file
from components.networks.efficientnet_lite import EfficientNetLite, SamePaddingConv2d
from components.networks.models import build_model
from tests.networks.test_pretrained import installed_weights

IMAGENET_DOGS = range(151, 269)  # ImageNet-1k's dog breeds
IMAGENET_CATS = range(281, 286)  # its domestic cats


@pytest.mark.parametrize("side, kernel", [(64, 3), (64, 5), (63, 3), (63, 5)])
def test_a_stride_two_conv_pads_as_tensorflows_same_does(side, kernel):
    """Even sides: the extra pixel after (TensorFlow), not before and after (torch)."""
    torch.manual_seed(0)
    conv = SamePaddingConv2d(4, 4, kernel, stride=2)
    x = torch.rand(1, 4, side, side)
    total = max((-(-side // 2) - 1) * 2 + kernel - side, 0)
    expected = F.conv2d(F.pad(x, (total // 2, total - total // 2) * 2), conv.weight, stride=2)
    assert torch.allclose(conv(x), expected) and conv(x).shape[-1] == -(-side // 2)


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
    net = EfficientNetLite(3, "efficientnet_lite0", 1.0, 1.0)
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


def test_frozen_statistics_keep_every_batch_norms_while_all_weights_learn():
    net = build_model("efficientnet_lite0", 3, 64)
    assert isinstance(net, EfficientNetLite)
    net.freeze(0, statistics=True)
    net.train()
    norms = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    before = [m.running_var.clone() for m in norms]
    net(torch.rand(4, 3, 64, 64)).sum().backward()
    assert all(torch.equal(m.running_var, kept) for m, kept in zip(norms, before, strict=True))
    assert all(p.grad is not None for p in net.parameters())
    assert net.training and net._dropout.training and not any(m.training for m in norms)


def test_frozen_blocks_beyond_the_net_are_refused():
    net = build_model("efficientnet_lite0", 3, 64)
    assert isinstance(net, EfficientNetLite)
    with pytest.raises(ValueError, match="expected 0 to 16 frozen blocks .* found 17"):
        net.freeze(17)
