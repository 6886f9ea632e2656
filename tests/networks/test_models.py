"""The networks, the classifier around them, and the model files they are saved to."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from components.core.identity import sha256_of
from components.core.names import SPEC_FILE
from components.networks.models import (
    Classifier,
    build_model,
    load_classifier,
    save_classifier,
    save_trained,
    shifted_views,
)
from components.networks.registry import NETS
from components.networks.spec import read_spec
from tests.support.models import SPEC

RGB_ONLY = {name for name, net in NETS.items() if net.pretrained}  # their weights take RGB


@pytest.mark.parametrize("name", sorted(NETS))
@pytest.mark.parametrize("channels, size", [(1, 50), (3, 64)])
def test_every_model_maps_images_to_two_logits(name, channels, size):
    if name in RGB_ONLY and channels == 1:
        with pytest.raises(ValueError, match=f"{name} takes RGB photos \\(3 channels\\), found 1"):
            build_model(name, channels, size)
        return
    net = build_model(name, channels, size)
    assert net(torch.zeros(3, channels, size, size)).shape == (3, 2)


def test_tutorial_cnn_is_the_tutorial_architecture():
    net = build_model("tutorial_cnn", 1, 50)
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size) for c in convs] == [
        (32, (5, 5)),
        (64, (5, 5)),
        (128, (5, 5)),
    ]
    assert (net.fc1.in_features, net.fc1.out_features, net.fc2.out_features) == (512, 512, 2)


def multiply_adds(net: torch.nn.Module, channels: int, size: int) -> int:
    """Multiply-adds of one image through the net's convolutions and linear layers."""
    total = 0

    def count(module, inputs, output) -> None:
        nonlocal total
        if isinstance(module, torch.nn.Conv2d):
            kernel = module.in_channels // module.groups * module.kernel_size[0] ** 2
            total += output.numel() * kernel
        elif isinstance(module, torch.nn.Linear):
            total += module.in_features * module.out_features

    hooks = [m.register_forward_hook(count) for m in net.modules()]
    net.eval()(torch.zeros(1, channels, size, size))
    for hook in hooks:
        hook.remove()
    return total


@pytest.mark.parametrize("name", ["compact_cnn", "five_conv_cnn"])
def test_the_grey_50_pixel_nets_cost_about_what_the_tutorial_net_does(name):
    tutorial = multiply_adds(build_model("tutorial_cnn", 1, 50), 1, 50)
    compact = multiply_adds(build_model(name, 1, 50), 1, 50)
    assert 25e6 < tutorial < 27e6 and compact < 1.35 * tutorial


def test_five_conv_cnn_has_five_convs_and_pools_after_four():
    net = build_model("five_conv_cnn", 1, 50)
    convs = [m.out_channels for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    pools = [m for m in net.modules() if isinstance(m, torch.nn.MaxPool2d)]
    assert convs == [32, 64, 96, 192, 256] and len(pools) == 4
    assert net.features(torch.zeros(1, 1, 50, 50)).shape == (1, 256, 3, 3)


def test_residual_cnn_sees_twice_the_side_for_about_compact_cnns_cost():
    residual = multiply_adds(build_model("residual_cnn", 3, 96), 3, 96)
    compact = multiply_adds(build_model("compact_cnn", 3, 64), 3, 64)
    assert compact < residual < 1.25 * compact


def test_residual_cnn_adds_its_blocks_input_to_their_output():
    net = build_model("residual_cnn", 3, 64).eval()
    blocks = [m for m in net.modules() if type(m).__name__ == "ResidualBlock"]
    assert [block.body[0].in_channels for block in blocks] == [64, 256]
    x = torch.randn(2, 64, 8, 8)
    torch.nn.init.zeros_(blocks[0].body[-1].weight)  # the body's last batch norm: output 0
    torch.nn.init.zeros_(blocks[0].body[-1].bias)
    torch.testing.assert_close(blocks[0](x), F.relu(x))


def test_lean_residual_cnn_is_residual_cnn_without_its_last_block():
    lean, full = build_model("lean_residual_cnn", 3, 96), build_model("residual_cnn", 3, 96)
    blocks = [m for m in lean.modules() if type(m).__name__ == "ResidualBlock"]
    assert [block.body[0].in_channels for block in blocks] == [64]
    assert lean.features(torch.zeros(1, 3, 96, 96)).shape == (1, 256, 3, 3)
    assert multiply_adds(lean, 3, 96) < 0.86 * multiply_adds(full, 3, 96)
    assert 3 * sum(p.numel() for p in lean.parameters()) < sum(p.numel() for p in full.parameters())


def test_stem16_residual_cnn_is_lean_residual_cnn_with_a_stem_of_one_block_of_16():
    slim, lean = build_model("stem16_residual_cnn", 3, 96), build_model("lean_residual_cnn", 3, 96)
    convs = [m for m in slim.modules() if isinstance(m, torch.nn.Conv2d)]
    assert convs[0].out_channels == convs[1].in_channels == 16
    assert [m.out_channels for m in convs[1:]] == [
        m.out_channels for m in lean.modules() if isinstance(m, torch.nn.Conv2d)
    ][1:]
    assert slim.features(torch.zeros(1, 3, 96, 96)).shape == (1, 256, 3, 3)
    assert multiply_adds(slim, 3, 96) < 0.92 * multiply_adds(lean, 3, 96)


def relu_then_pool(net: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``net`` in the textbook order: every max-pool moved after its ReLU."""
    ordered = copy.deepcopy(net)
    for module in ordered.modules():
        if isinstance(module, torch.nn.Sequential):
            pools = [i for i, m in enumerate(module) if isinstance(m, torch.nn.MaxPool2d)]
            for i in pools:
                assert isinstance(module[i + 1], torch.nn.ReLU)
                module[i], module[i + 1] = module[i + 1], module[i]
    return ordered


def tutorial_forward(net, x: torch.Tensor) -> torch.Tensor:
    """The tutorial's own order of operations, with ``net``'s weights."""
    for conv in (net.conv1, net.conv2, net.conv3):
        x = F.max_pool2d(F.relu(conv(x)), 2)
    return net.fc2(F.relu(net.fc1(torch.flatten(x, 1))))


@pytest.mark.parametrize(
    "name",
    [
        *("tutorial_cnn", "compact_cnn", "five_conv_cnn", "bn_cnn"),
        *("residual_cnn", "lean_residual_cnn", "stem16_residual_cnn"),
    ],
)
def test_pooling_before_the_relu_computes_the_textbook_function(name):
    torch.manual_seed(0)
    net = build_model(name, 3, 50).train()
    if name == "tutorial_cnn":
        textbook = copy.deepcopy(net)
        textbook_forward = functools.partial(tutorial_forward, textbook)
    else:
        textbook = textbook_forward = relu_then_pool(net)
        assert [type(m) for m in textbook.modules()] != [type(m) for m in net.modules()]
    x = torch.randn(4, 3, 50, 50)
    torch.manual_seed(1)  # the same dropout mask for both
    ours = net(x)
    torch.manual_seed(1)
    theirs = textbook_forward(x)
    torch.testing.assert_close(ours, theirs)
    ours.square().sum().backward()
    theirs.square().sum().backward()
    for mine, reference in zip(net.parameters(), textbook.parameters(), strict=True):
        torch.testing.assert_close(mine.grad, reference.grad)


def test_unknown_model_lists_the_valid_names():
    with pytest.raises(ValueError, match=f"expected one of: {', '.join(NETS)}$"):
        build_model("vgg", 1, 50)


def test_too_small_images_are_a_clear_error():
    with pytest.raises(ValueError, match="at least 36 pixels"):
        build_model("tutorial_cnn", 1, 32)
    with pytest.raises(ValueError, match="five_conv_cnn need images of at least 16 pixels"):
        build_model("five_conv_cnn", 1, 12)


def test_classifier_normalises_raw_pixels():
    net = torch.nn.Flatten()
    model = Classifier(net, mean=[0.5], std=[0.25])
    out = model(torch.tensor([[[[127.5, 255.0]]]]))
    assert torch.allclose(out, torch.tensor([[0.0, 2.0]]))


def test_mirror_averaging_predicts_the_mean_of_both_views_in_eval_mode():
    torch.manual_seed(0)
    net = build_model("compact_cnn", 3, 50)
    plain = Classifier(net, [0.5] * 3, [0.25] * 3).eval()
    mirrored = Classifier(net, [0.5] * 3, [0.25] * 3, mirror_average=True).eval()
    pixels = torch.randint(0, 256, (4, 3, 50, 50)).float()
    with torch.no_grad():
        expected = (plain(pixels).softmax(1) + plain(pixels.flip(3)).softmax(1)) / 2
        assert torch.allclose(mirrored(pixels).softmax(1), expected, atol=1e-6)
        assert torch.allclose(mirrored(pixels), mirrored(pixels.flip(3)), atol=1e-6)
    torch.manual_seed(1)
    trained = mirrored.train()(pixels)
    torch.manual_seed(1)
    assert torch.equal(trained, plain.train()(pixels))  # training sees one view


def test_mirror_averaging_stays_finite_when_the_net_is_certain():
    # a symmetric image: both views give logits 0 and 2550, whose softmax underflows to 0
    model = Classifier(torch.nn.Flatten(), [0.0], [1 / 2550], mirror_average=True).eval()
    out = model(torch.tensor([[[[0.0, 255.0, 0.0]]]]))
    assert torch.isfinite(out).all()
    assert torch.allclose(out, torch.tensor([[0.0, 2550.0, 0.0]]).log_softmax(1))


def test_shifted_views_are_the_image_and_four_diagonal_moves_with_edges_reflected():
    images = torch.arange(2 * 10 * 12, dtype=torch.float32).view(2, 1, 10, 12)
    views = shifted_views(images, step=2)
    assert len(views) == 5 and torch.equal(views[0], images)
    for view, (dy, dx) in zip(views[1:], [(-2, -2), (-2, 2), (2, -2), (2, 2)], strict=True):
        assert view.shape == images.shape
        # inside the edges, a view is the image moved by (dy, dx)
        assert torch.equal(view[..., 2:-2, 2:-2], images[..., 2 + dy : 8 + dy, 2 + dx : 10 + dx])
    assert torch.equal(views[1][..., 0, 2:], images[..., 2, :-2])  # row -2 reflects row 2


@pytest.mark.parametrize("mirror", [False, True])
def test_shift_averaging_predicts_the_mean_over_its_views_in_eval_mode(mirror):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Dropout(), torch.nn.Linear(2500, 2))
    plain = Classifier(net, [0.5], [0.25]).eval()
    averaged = Classifier(net, [0.5], [0.25], mirror_average=mirror, shift_average=True).eval()
    pixels = torch.randint(0, 256, (4, 1, 50, 50)).float()
    views = shifted_views(pixels)
    views += [view.flip(3) for view in views] if mirror else []
    with torch.no_grad():
        expected = torch.stack([plain(view).softmax(1) for view in views]).mean(0)
        assert torch.allclose(averaged(pixels).softmax(1), expected, atol=1e-6)
        assert not torch.allclose(plain(pixels).softmax(1), expected, atol=1e-2)
    torch.manual_seed(1)
    trained = averaged.train()(pixels)
    torch.manual_seed(1)
    assert torch.equal(trained, plain.train()(pixels))  # training sees one view


def saved_model(directory: Path, **changes) -> Path:
    """A model.pt as the train step writes it, its spec changed by ``changes``."""
    net = build_model("tutorial_cnn", 1, 40)
    save_classifier(directory / "model.pt", Classifier(net, [0.45], [0.25]), {**SPEC, **changes})
    return directory


class WritesOnLoad:
    """Pickles as a call to ``open(witness, "w")``: what a hostile model file could hold."""

    def __init__(self, witness: Path):
        self.witness = str(witness)

    def __reduce__(self):
        return (open, (self.witness, "w"))


def test_a_model_file_holding_code_is_refused_and_the_code_never_runs(tmp_path):
    witness = tmp_path / "pwned"
    torch.save({"state_dict": {}, **SPEC, "extra": WritesOnLoad(witness)}, tmp_path / "model.pt")
    with pytest.raises(ValueError, match="only tensors and plain data are loaded, never code"):
        load_classifier(tmp_path)
    assert not witness.exists()


@pytest.mark.parametrize("cut", [0, 1000], ids=["empty", "truncated"])
def test_an_unreadable_model_file_is_a_clear_error_naming_it(tmp_path, cut):
    whole = (saved_model(tmp_path) / "model.pt").read_bytes()
    (tmp_path / "model.pt").write_bytes(whole[:cut])
    with pytest.raises(ValueError, match=f"cannot load {tmp_path}/model.pt, a model from"):
        load_classifier(tmp_path)


@pytest.mark.parametrize(
    "changes, message",
    [
        # refused before a net for 10⁹-pixel sides is built (terabytes of weights)
        ({"image_size": 10**9}, "image_size from 8 to 512, found 1000000000"),
        ({"std": [0.0]}, r"std: one number in \(0, 1\] per channel"),
        ({"classes": ["dog"]}, r"2 to 100 classes in classes, found 1: dog"),
        ({"model": ["tutorial_cnn"]}, "expected a model name and mirror_average and shift"),
        ({"mirror_average": "yes"}, "expected a model name and mirror_average and shift"),
        ({"shift_average": 1}, "expected a model name and mirror_average and shift"),
        ({"image_size": 64}, "expected weights of tutorial_cnn for 1×64×64 images in"),
        ({"model": "resnet18"}, "expected weights of resnet18 for 1×40×40 images in"),
    ],
)
def test_a_model_file_outside_the_contract_is_refused_naming_what_is_wrong(
    tmp_path, changes, message
):
    with pytest.raises(ValueError, match=message):
        load_classifier(saved_model(tmp_path, **changes))


def test_a_model_saved_before_mirror_and_shift_averaging_loads_without_them(tmp_path):
    averages = ("mirror_average", "shift_average")
    spec = {key: value for key, value in SPEC.items() if key not in averages}
    net = build_model("tutorial_cnn", 1, 40)
    save_classifier(tmp_path / "model.pt", Classifier(net, [0.45], [0.25]), spec)
    model, loaded = load_classifier(tmp_path)
    assert model.mirror_average is False and loaded["mirror_average"] is False
    assert model.shift_average is False and loaded["shift_average"] is False


def test_a_shift_averaging_model_loads_with_it(tmp_path):
    model, loaded = load_classifier(saved_model(tmp_path, shift_average=True))
    assert model.shift_average is True and loaded["shift_average"] is True


def test_a_trained_net_is_saved_with_its_spec_beside_it_each_file_digested(tmp_path):
    net = build_model("tutorial_cnn", 1, 40)
    digests = save_trained(tmp_path, Classifier(net, [0.45], [0.25]), SPEC)
    assert digests == {name: sha256_of(tmp_path / name) for name in ("model.pt", SPEC_FILE)}
    assert read_spec(tmp_path / SPEC_FILE) == load_classifier(tmp_path)[1] == SPEC
