"""The classifier's ONNX graph through a training run: exported once, its weights swapped
in for each epoch's validation, checked against eager torch and written at the end."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import onnx
import torch

from components.core.atomic import atomic_file
from components.scoring.onnx_export import check_agreement, export_graph, swappable, with_weights
from components.scoring.scorers import OnnxScorer, session_threads
from components.training.models import Classifier

log = logging.getLogger(__name__)


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
        if self.graph is None or not self.swaps:
            self.graph = export_graph(model, photos[:2].repeat(2, 1, 1, 1))
            self.swaps = swappable(self.graph, model)
            if not self.swaps:
                log.info("the ONNX exporter folded a weight into a constant: exporting each time")
            return self.graph
        return with_weights(self.graph, model)

    def scorer(self, model: Classifier, photos: torch.Tensor) -> OnnxScorer:
        """An ONNX Runtime session of the graph with ``model``'s weights now."""
        return OnnxScorer(self.current(model, photos).SerializeToString(), session_threads())

    def write(self, path: Path, model: Classifier, photos: torch.Tensor) -> None:
        """Write the graph with ``model``'s weights to ``path`` once ONNX Runtime gives
        eager torch's class probabilities on ``photos`` (real ones: a batch of val).

        Raises:
            RuntimeError: the two differ by more than ``check_agreement`` allows.
        """
        graph = self.current(model, photos)
        pixels = photos.cpu().float()
        with torch.no_grad():
            expected = _eager_logits(model, pixels)
        found = OnnxScorer(graph.SerializeToString(), session_threads())(pixels.numpy())
        check_agreement(found, expected)
        with atomic_file(path) as handle:
            handle.write(graph.SerializeToString())


def _eager_logits(model: Classifier, pixels: torch.Tensor) -> np.ndarray:
    """``model``'s logits for ``pixels`` in eval mode on its device, back in its mode."""
    was_training = model.training
    device = next(model.parameters()).device
    try:
        logits: np.ndarray = model.eval()(pixels.to(device)).float().cpu().numpy()
    finally:
        model.train(was_training)
    return logits
