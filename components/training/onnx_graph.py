"""The classifier's ONNX graph through a training run: exported once, its weights swapped
in for each epoch's validation, checked against eager torch and written at the end.

An export takes one to four seconds and a swap milliseconds, so exported graphs are kept
by the net's structure in the process that exported them (the trials of a search on this
machine, which train the same net with other settings, export it once between them).
Never on disk: a graph this process did not export could be anyone's, and one with a
path of its own that adds nothing on natural photos passes any check on them.
"""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import numpy as np
import onnx
import torch

from components.core.atomic import atomic_file
from components.networks.models import Classifier
from components.scoring.onnx_export import check_agreement, export_graph, swappable, with_weights
from components.scoring.scorers import OnnxScorer, session_threads

log = logging.getLogger(__name__)

CLASSES_PROPERTY = "classes"  # the metadata property naming the logits' classes, as JSON
KEPT_EXPORTS = 4  # graphs kept in a process, by structure (resnet18's: 45 MB)
_exported: dict[tuple[object, ...], onnx.ModelProto] = {}


class OnnxGraph:
    """A classifier's exported graph, kept to take the weights training gives it."""

    def __init__(self) -> None:
        self.graph: onnx.ModelProto | None = None
        self.swaps = False  # whether every weight is an initializer by its own name

    def current(self, model: Classifier, photos: torch.Tensor) -> onnx.ModelProto:
        """The graph with ``model``'s weights now; exported on first use (and each time
        where the exporter folded a weight into a constant).

        ``photos``: two or more of the model's input, to trace the export with.
        """
        structure = _structure(model, photos)
        if self.graph is None:
            self.graph = _kept(structure, model)
            self.swaps = self.graph is not None
        if self.graph is None or not self.swaps:
            self.graph = export_graph(model, photos[:2].repeat(2, 1, 1, 1))
            self.swaps = swappable(self.graph, model)
            if not self.swaps:
                log.info("the ONNX exporter folded a weight into a constant: exporting each time")
                return self.graph
            _remember(structure, self.graph)
            return self.graph
        return with_weights(self.graph, model)

    def scorer(self, model: Classifier, photos: torch.Tensor) -> OnnxScorer:
        """An ONNX Runtime session of the graph with ``model``'s weights now."""
        return OnnxScorer(self.current(model, photos).SerializeToString(), session_threads())

    def write(
        self, path: Path, model: Classifier, photos: torch.Tensor, classes: list[str]
    ) -> bytes:
        """Write the graph with ``model``'s weights, its ``classes`` in its metadata (as
        JSON), to ``path`` once ONNX Runtime gives eager torch's class probabilities on
        ``photos`` (real ones: a batch of val); the bytes written, the very ones checked.

        Raises:
            RuntimeError: the two differ by more than ``check_agreement`` allows.
        """
        proto = self.current(model, photos)
        _set_property(proto, CLASSES_PROPERTY, json.dumps(classes, ensure_ascii=False))
        graph: bytes = proto.SerializeToString()
        pixels = photos.cpu().float()
        with torch.no_grad():
            expected = _eager_logits(model, pixels)
        found = OnnxScorer(graph, session_threads())(pixels.numpy())
        check_agreement(found, expected)
        with atomic_file(path) as handle:
            handle.write(graph)
        return graph


def _set_property(graph: onnx.ModelProto, key: str, value: str) -> None:
    """Set metadata property ``key`` of ``graph`` to ``value``, the others kept."""
    for prop in graph.metadata_props:
        if prop.key == key:
            prop.value = value
            return
    graph.metadata_props.add(key=key, value=value)


def _kept(structure: tuple[object, ...], model: Classifier) -> onnx.ModelProto | None:
    """The graph this process exported for ``structure``, where ``model``'s weights swap in."""
    kept = _exported.get(structure)
    return kept if kept is not None and swappable(kept, model) else None


def _remember(structure: tuple[object, ...], graph: onnx.ModelProto) -> None:
    if len(_exported) >= KEPT_EXPORTS:
        _exported.clear()
    _exported[structure] = graph


def _structure(model: Classifier, photos: torch.Tensor) -> tuple[object, ...]:
    """What an exported graph depends on besides the weights' values: the modules and their
    settings (their printout), the views averaged and the photos' shape."""
    return (repr(model), model.mirror_average, model.shift_average, tuple(photos.shape[1:]))


def _eager_logits(model: Classifier, pixels: torch.Tensor) -> np.ndarray:
    """``model``'s float32 logits for ``pixels`` in eval mode, back in its mode; on the CPU,
    where the graph is scored (a GPU's convolutions run in TF32 by default, about 1e-3 off
    float32: more than ``check_agreement`` allows)."""
    on_cpu = next(model.parameters()).device.type == "cpu"
    reference = model if on_cpu else copy.deepcopy(model).cpu()
    was_training = reference.training
    try:
        logits: np.ndarray = reference.eval()(pixels.cpu()).float().numpy()
    finally:
        reference.train(was_training)
    return logits
