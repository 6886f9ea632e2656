"""The exported graph gives eager torch's answers, views averaged inside it, for every net;
its weights follow training without a second export."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from components.networks.models import Classifier, build_model
from components.scoring.onnx_export import (
    check_agreement,
    export_graph,
    swappable,
    with_weights,
)
from components.scoring.scorers import OnnxScorer

NETS = [  # (net, channels, size, mirror_average, shift_average); efficientnet_lite0, the accurate
    # and pretrained presets', is exported and checked by tests/training/test_session.py
    ("five_conv_cnn", 1, 50, True, True),
    ("compact_cnn", 3, 64, True, False),
    ("stem16_residual_cnn", 3, 96, True, False),  # the cpu preset's net
    ("tutorial_cnn", 1, 50, False, False),
    ("bn_cnn", 3, 32, True, False),
]


def trained_looking(net: str, channels: int, size: int, *views: bool) -> Classifier:
    """A classifier of fixed random weights whose batch-norm statistics are not the
    initial zeros and ones (as after training)."""
    torch.manual_seed(0)
    model = Classifier(build_model(net, channels, size), [0.5] * channels, [0.25] * channels)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 2.0)
    return model.eval()


def photos(count: int, channels: int, size: int, seed: int = 1) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (count, channels, size, size), generator=generator).float()


def eager(model: torch.nn.Module, pixels: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return model(pixels).numpy()


@pytest.mark.parametrize("net, channels, size, mirror, shift", NETS)
def test_onnx_runtime_gives_eager_torchs_answers_at_any_batch(net, channels, size, mirror, shift):
    model = trained_looking(net, channels, size)
    model.mirror_average, model.shift_average = mirror, shift
    graph = export_graph(model, photos(2, channels, size))
    assert swappable(graph, model)  # each weight an initializer of its own name
    scorer = OnnxScorer(graph.SerializeToString(), 1)
    for count in (1, 5):  # the batch is free, though the export saw two photos
        pixels = photos(count, channels, size, seed=count)
        check_agreement(scorer(pixels.numpy()), eager(model, pixels), tolerance=1e-5)


def test_swapped_weights_give_the_answers_of_the_changed_model():
    """Validation swaps each epoch's weights into one export: the answers follow."""
    model = trained_looking("compact_cnn", 1, 40)
    model.mirror_average = model.shift_average = True
    graph = export_graph(model, photos(2, 1, 40))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.mul_(1.5)
        for module in model.modules():
            if isinstance(module, torch.nn.BatchNorm2d):
                module.running_var.mul_(2.0)
    pixels = photos(8, 1, 40)
    before = OnnxScorer(graph.SerializeToString(), 1)(pixels.numpy())
    after = OnnxScorer(with_weights(graph, model).SerializeToString(), 1)(pixels.numpy())
    check_agreement(after, eager(model, pixels), tolerance=1e-5)
    with pytest.raises(RuntimeError, match="within 1e-05 on 8 photos, found a difference"):
        check_agreement(before, eager(model, pixels), tolerance=1e-5)


def test_a_graph_missing_a_weight_is_not_swappable():
    model = trained_looking("tutorial_cnn", 1, 50)
    graph = export_graph(model, photos(2, 1, 50))
    kept = [tensor for tensor in graph.graph.initializer if tensor.name != "net.fc2.bias"]
    del graph.graph.initializer[:]
    graph.graph.initializer.extend(kept)
    assert not swappable(graph, model)


def test_a_graph_that_dropped_an_idle_weight_is_not_swappable():
    """A bias of zeros leaves the optimized graph: a later bias would be lost."""
    model = trained_looking("tutorial_cnn", 1, 40)
    with torch.no_grad():
        model.net.conv1.bias.zero_()
    assert not swappable(export_graph(model, photos(2, 1, 40)), model)


def test_exporting_prints_nothing_and_leaves_sys_stdout_alone(monkeypatch, capfd):
    """The export swaps no process-wide stream: another thread's prints (a test's, a
    server's) go where that thread sends them, while a graph exports."""
    seen = []
    export = torch.onnx.export

    def watched(*args, **kwargs):
        seen.append(sys.stdout)
        return export(*args, **kwargs)

    monkeypatch.setattr(torch.onnx, "export", watched)
    before = sys.stdout
    export_graph(trained_looking("tutorial_cnn", 1, 50), photos(2, 1, 50))
    assert seen == [before] and sys.stdout is before
    assert capfd.readouterr().out == ""
