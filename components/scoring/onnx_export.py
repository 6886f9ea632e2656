"""The classifier as an ONNX graph: exported once, its weights swapped in as training goes.

``torch.onnx.export`` (the torch.export-based exporter, the opset pinned) writes the whole
eval-mode classifier: normalisation, the net and the averaging over views, so one
ONNX Runtime call scores every view of a photo. The views go through the net as one
batch: the function is the classifier's, the graph holds the net once (ten views: a
tenth of the nodes, under half the export time). Exporting takes seconds; swapping the
weights of an exported graph takes milliseconds, so validation re-exports nothing.
"""

from __future__ import annotations

import copy
import logging

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from components.networks.models import Classifier, OneBatchOfViews
from components.scoring.onnx_file import INPUT, OUTPUT, VIEWS
from components.scoring.scorers import softmax

OPSET = 18  # ONNX Runtime 1.20 on runs it; pinned so a model's graph does not follow torch


def export_graph(model: Classifier, example: torch.Tensor) -> onnx.ModelProto:
    """``model`` in eval mode as an ONNX graph: ``pixels`` (N×C×S×S, 0–255, N free) in,
    ``logits`` (N×K) out, each weight an initializer named as in its state dict, the
    number of views in its metadata.

    ``example``: a batch of two or more photos of the model's input shape.
    """
    copied = copy.deepcopy(model).cpu().eval().to(memory_format=torch.contiguous_format)
    cpu = OneBatchOfViews(copied).eval()
    batch = torch.export.Dim("batch")
    with torch.no_grad():
        program = torch.onnx.export(
            cpu,
            (example.cpu().float(),),
            dynamo=True,
            opset_version=OPSET,
            dynamic_shapes={INPUT: {0: batch}},
            input_names=[INPUT],
            output_names=[OUTPUT],
            verbose=False,
            optimize=False,  # below, with the weights kept
        )
        assert program is not None  # the dynamo exporter always returns its program
        graph = _optimized(program.model_proto, list(_weights(model)))
    onnx.helper.set_model_props(graph, {VIEWS: str(cpu.view_count())})
    return graph


def _optimized(graph: onnx.ModelProto, weights: list[str]) -> onnx.ModelProto:
    """The graph through onnxscript's optimizer (the exporter's own: constants folded,
    its shape arithmetic gone), each weight kept as an initializer of its own name.

    The optimizer folds no graph input, so the weights are shown to it as inputs while
    it runs: ONNX Runtime then folds batch norms into convolutions itself, at load, from
    whichever weights the file holds.
    """
    import onnxscript  # a second of imports, where a graph is exported (the exporter's own)

    inputs = len(graph.graph.input)
    by_name = {tensor.name: tensor for tensor in graph.graph.initializer}
    graph.graph.input.extend(
        onnx.helper.make_tensor_value_info(name, by_name[name].data_type, by_name[name].dims)
        for name in weights
        if name in by_name
    )
    logger = logging.getLogger("onnx_ir.passes.common.initializer_deduplication")
    level = logger.level
    logger.setLevel(logging.ERROR)  # it notes each weight it leaves alone
    try:
        optimized: onnx.ModelProto = onnxscript.optimizer.optimize(graph)
    finally:
        logger.setLevel(level)
    del optimized.graph.input[inputs:]
    return optimized


def swappable(graph: onnx.ModelProto, model: torch.nn.Module) -> bool:
    """Whether every weight of ``model`` is an initializer of ``graph`` by its own name
    that the graph reads, so ``with_weights`` carries every change training makes (the
    optimizer drops a weight whose value makes it idle, a bias of zeros, say)."""
    names = {tensor.name for tensor in graph.graph.initializer}
    read = {name for node in graph.graph.node for name in node.input}
    return all(key in names and key in read for key in _weights(model))


def with_weights(graph: onnx.ModelProto, model: torch.nn.Module) -> onnx.ModelProto:
    """A copy of ``graph`` holding ``model``'s current weights (see ``swappable``)."""
    weights = _weights(model)
    updated = onnx.ModelProto()
    updated.CopyFrom(graph)
    for index, tensor in enumerate(updated.graph.initializer):
        if tensor.name in weights:
            array = weights[tensor.name].detach().cpu().contiguous().numpy()
            updated.graph.initializer[index].CopyFrom(numpy_helper.from_array(array, tensor.name))
    return updated


def _weights(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The state dict's entries a forward pass in eval mode reads (not the batch counts)."""
    return {
        key: value
        for key, value in model.state_dict().items()
        if not key.endswith("num_batches_tracked")
    }


def check_agreement(
    onnx_logits: np.ndarray, torch_logits: np.ndarray, tolerance: float = 1e-4
) -> None:
    """Refuse an export whose class probabilities differ from eager torch's.

    Raises:
        RuntimeError: a probability differs by more than ``tolerance``.
    """
    found = float(np.abs(softmax(onnx_logits) - softmax(torch_logits)).max(initial=0.0))
    if not found <= tolerance:
        raise RuntimeError(
            f"expected the ONNX export to give eager torch's class probabilities within "
            f"{tolerance:g} on {len(torch_logits)} photos, found a difference of {found:.3g}"
        )
