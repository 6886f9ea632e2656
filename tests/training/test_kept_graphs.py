"""Exported graphs kept on disk: the next process training the same net takes one, with
its own weights; a file that is not this net's graph is exported over; a cache that
cannot be written costs an export, nothing else."""

from __future__ import annotations

import logging

import pytest
import torch

from components.networks.models import Classifier, build_model
from components.scoring.scorers import OnnxScorer
from components.training import kept_graphs, onnx_graph
from tests.training.test_onnx_graph import counting_exports, model_and_photos


def test_the_next_process_takes_the_graph_kept_on_disk_with_its_own_weights(monkeypatch, tmp_path):
    calls = counting_exports(monkeypatch, tmp_path)
    first, photos = model_and_photos()
    onnx_graph.OnnxGraph().current(first, photos)
    monkeypatch.setattr(onnx_graph, "_exported", {})  # a new process: nothing in memory
    torch.manual_seed(1)
    second = Classifier(build_model("tutorial_cnn", 1, 40), [0.4], [0.3]).eval()
    scored = onnx_graph.OnnxGraph().scorer(second, photos)(photos.numpy())
    with torch.no_grad():
        expected = second(photos).numpy()
    assert len(calls) == 1
    assert abs(scored - expected).max() < 1e-4
    (kept,) = (tmp_path / "cache/dogs-vs-cats" / kept_graphs.FOLDER).iterdir()
    assert kept == kept_graphs.kept_path(onnx_graph._structure(second, photos))


@pytest.mark.parametrize("planted", ["another net's graph", "not a graph", "too large"])
def test_a_kept_file_that_is_not_this_nets_graph_is_exported_over(
    planted, monkeypatch, tmp_path, caplog
):
    """The mirror-averaging net's graph has the same weights but other answers; a
    file of another kind, or larger than the weights allow, is not even parsed."""
    calls = counting_exports(monkeypatch, tmp_path)
    model, photos = model_and_photos()
    path = kept_graphs.kept_path(onnx_graph._structure(model, photos))
    path.parent.mkdir(parents=True)
    if planted == "another net's graph":
        mirrored = Classifier(
            build_model("tutorial_cnn", 1, 40), [0.5], [0.25], mirror_average=True
        ).eval()
        path.write_bytes(onnx_graph.export_graph(mirrored, photos[:4]).SerializeToString())
    else:
        path.write_bytes(b"\x08" * (20 * 2**20 if planted == "too large" else 100))
    calls.clear()
    with caplog.at_level(logging.WARNING):
        scored = onnx_graph.OnnxGraph().scorer(model, photos)(photos.numpy())
    with torch.no_grad():
        expected = model(photos).numpy()
    assert len(calls) == 1 and abs(scored - expected).max() < 1e-4
    assert "not taking the kept graph" in caplog.text
    assert (
        path.read_bytes()
        == onnx_graph._exported[onnx_graph._structure(model, photos)].SerializeToString()
    )  # replaced by the export


def test_a_cache_that_cannot_be_written_leaves_training_alone(monkeypatch, tmp_path):
    calls = counting_exports(monkeypatch, tmp_path)
    (tmp_path / "cache").write_text("a file where the folder would be")
    model, photos = model_and_photos()
    for _ in range(2):
        monkeypatch.setattr(onnx_graph, "_exported", {})
        assert isinstance(onnx_graph.OnnxGraph().scorer(model, photos), OnnxScorer)
    assert len(calls) == 2
