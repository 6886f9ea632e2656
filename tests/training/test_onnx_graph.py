"""A run's ONNX graph: exported once, following the weights after, and written only when
it gives eager torch's answers."""

from __future__ import annotations

import pytest
import torch

from components.networks.models import Classifier, build_model
from components.scoring.scorers import OnnxScorer
from components.training import onnx_graph


def model_and_photos() -> tuple[Classifier, torch.Tensor]:
    torch.manual_seed(0)
    model = Classifier(build_model("tutorial_cnn", 1, 40), [0.5], [0.25]).eval()
    photos = torch.randint(0, 256, (6, 1, 40, 40), generator=torch.Generator().manual_seed(0))
    return model, photos.float()


def counting_exports(monkeypatch, tmp_path) -> list[int]:
    calls: list[int] = []
    export = onnx_graph.export_graph
    monkeypatch.setattr(onnx_graph, "_exported", {})  # none kept from earlier tests
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nor on disk

    def counted(*args):
        calls.append(1)
        return export(*args)

    monkeypatch.setattr(onnx_graph, "export_graph", counted)
    return calls


def test_the_graph_is_exported_once_and_follows_the_weights(monkeypatch, tmp_path):
    calls = counting_exports(monkeypatch, tmp_path)
    model, photos = model_and_photos()
    graph = onnx_graph.OnnxGraph()
    graph.current(model, photos)
    with torch.no_grad():
        model.net.fc2.bias[1] += 3.0
    scored = graph.scorer(model, photos)(photos.numpy())
    with torch.no_grad():
        expected = model(photos).numpy()
    assert len(calls) == 1
    assert abs(scored - expected).max() < 1e-4


def test_a_second_run_of_the_same_net_takes_the_kept_graph_with_its_own_weights(
    monkeypatch, tmp_path
):
    calls = counting_exports(monkeypatch, tmp_path)
    first, photos = model_and_photos()
    onnx_graph.OnnxGraph().current(first, photos)
    torch.manual_seed(1)
    second = Classifier(build_model("tutorial_cnn", 1, 40), [0.4], [0.3]).eval()
    scored = onnx_graph.OnnxGraph().scorer(second, photos)(photos.numpy())
    with torch.no_grad():
        expected, others = second(photos).numpy(), first(photos).numpy()
    assert len(calls) == 1
    assert abs(scored - expected).max() < 1e-4 and abs(scored - others).max() > 1e-2
    wider = Classifier(build_model("tutorial_cnn", 1, 44), [0.5], [0.25]).eval()
    onnx_graph.OnnxGraph().current(wider, torch.zeros(2, 1, 44, 44))
    mirrored = Classifier(build_model("tutorial_cnn", 1, 40), [0.5], [0.25], mirror_average=True)
    onnx_graph.OnnxGraph().current(mirrored.eval(), photos)
    assert len(calls) == 3  # another shape, other views: exported anew


def test_a_graph_whose_weights_cannot_be_swapped_is_exported_each_time(monkeypatch, tmp_path):
    calls = counting_exports(monkeypatch, tmp_path)
    monkeypatch.setattr(onnx_graph, "swappable", lambda graph, model: False)
    model, photos = model_and_photos()
    graph = onnx_graph.OnnxGraph()
    for _ in range(2):
        assert isinstance(graph.scorer(model, photos), OnnxScorer)
    assert len(calls) == 2


def test_a_graph_that_answers_otherwise_than_torch_is_not_written(monkeypatch, tmp_path):
    """Weights left out of the swap: the check stops the write, and no file is left."""
    model, photos = model_and_photos()
    graph = onnx_graph.OnnxGraph()
    graph.current(model, photos)
    monkeypatch.setattr(onnx_graph, "with_weights", lambda stale, model: stale)
    with torch.no_grad():
        model.net.fc2.bias[1] += 3.0
    with pytest.raises(RuntimeError, match="expected the ONNX export to give eager torch's"):
        graph.write(tmp_path / "model.onnx", model, photos, ["cat", "dog"])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
def test_a_model_trained_on_the_gpu_is_checked_against_float32_on_the_cpu(tmp_path):
    """The GPU's TF32 convolutions are not the reference: resnet18 on CUDA is written, and
    stays on its device and in its mode."""
    torch.manual_seed(0)
    model = Classifier(build_model("resnet18", 3, 128), [0.5] * 3, [0.25] * 3).cuda().train()
    photos = torch.randint(0, 256, (64, 3, 128, 128), generator=torch.Generator().manual_seed(0))
    onnx_graph.OnnxGraph().write(
        tmp_path / "model.onnx", model, photos.float().cuda(), ["cat", "dog"]
    )
    assert (tmp_path / "model.onnx").stat().st_size > 0
    assert model.training and next(model.parameters()).is_cuda


def test_a_new_process_exports_its_own_graph_and_keeps_none_on_disk(monkeypatch, tmp_path):
    """A graph on disk could be anyone's: one with a trigger path of its own adds 0 on
    natural photos and passes any check on them, so a process takes only its own export."""
    calls = counting_exports(monkeypatch, tmp_path)
    model, photos = model_and_photos()
    onnx_graph.OnnxGraph().current(model, photos)
    monkeypatch.setattr(onnx_graph, "_exported", {})  # a new process: nothing in memory
    onnx_graph.OnnxGraph().current(model, photos)
    assert len(calls) == 2
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").rglob("*.onnx"))
