"""The classifier's ONNX graph in int8: ONNX Runtime's static quantisation, kept only where it
scores the val split as well as the float32 graph, within ``MOST_POINTS_LOST``.

The net's own operators run in int8 (a static QDQ graph): convolutions and matrix
products with 8-bit weights, one scale per output channel, and the residual sums and
ReLU6 clips between them, so that activations stay uint8 from one convolution to the
next; their ranges are read off real photos (``calibration``). The views' slicing,
padding and averaging stay float32. Measured on both kinds of net (docs/BENCHMARKS.md):
quantising the convolutions alone kept the pretrained net's activations converting back
and forth (1.2 points lost at 1.24× float32's speed; this way 0.1 at 2.59×), and
quantising every operator slowed the tutorial net's ten views (1.07×; this way 1.92×).
8-bit weights need an int8 dot product to multiply exactly (``components.core.int8_cpu``):
the default runtime scores this graph only on such a CPU.
"""

from __future__ import annotations

import logging
import math
import tempfile
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import onnx
from onnxruntime import quantization

from components.scoring.onnx_file import INPUT
from components.scoring.scorers import OnnxScorer, score_batches, session_threads

log = logging.getLogger(__name__)

CALIBRATION_PHOTOS = 512  # train photos whose activations set the int8 ranges
# the quantiser's calibration run holds every activation of its batch: about 0.4 GB a
# photo of 260×260 (Lite2), 13 GB for a batch of 32; a batch of this many pixels keeps it
# near 2 GB, as fast, and sets the same ranges (min and max over all the photos)
CALIBRATION_PIXELS = 4 * 260 * 260
MOST_CALIBRATION_BATCH = 32
MOST_POINTS_LOST = 0.2  # val accuracy, in percentage points, int8 may lose against float32
QUANTISED_OPS = ["Conv", "Gemm", "MatMul", "Add", "Clip"]  # the net's own, as above


class _Photos(quantization.CalibrationDataReader):  # type: ignore[misc]
    """The calibration photos, a batch at a time, as the graph's input."""

    def __init__(self, photos: np.ndarray):
        batch = calibration_batch(photos.shape[-1])
        self.batches = iter(
            photos[start : start + batch].astype(np.float32)
            for start in range(0, len(photos), batch)
        )

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self.batches, None)
        return None if batch is None else {INPUT: batch}


def calibration_batch(side: int) -> int:
    """Photos of ``side``×``side`` calibrated at a time: ``CALIBRATION_PIXELS`` at most."""
    return max(1, min(MOST_CALIBRATION_BATCH, CALIBRATION_PIXELS // (side * side)))


def judgeable(train_photos: int, val_photos: int) -> bool:
    """Whether an int8 graph can be judged: one val photo must weigh at most
    ``MOST_POINTS_LOST`` points of accuracy (500 photos for 0.2). The log says why where
    it cannot, and where fewer than ``CALIBRATION_PHOTOS`` train photos set its ranges."""
    needed_val = math.ceil(100 / MOST_POINTS_LOST)
    if val_photos < needed_val:
        log.warning(
            "no int8 graph: %d val photos cannot tell a loss of %g points of val accuracy "
            "(one photo in %d); hold out more photos for val",
            val_photos, MOST_POINTS_LOST, needed_val,
        )  # fmt: skip
        return False
    if train_photos < CALIBRATION_PHOTOS:
        log.warning(
            "int8: %d train photos set the int8 ranges, fewer than the %d it calibrates on",
            train_photos, CALIBRATION_PHOTOS,
        )  # fmt: skip
    return True


def calibration_picks(labels: np.ndarray, seed: int) -> np.ndarray:
    """Which train photos (by their ``labels``) calibrate the int8 ranges:
    ``CALIBRATION_PHOTOS`` of them, drawn in an order the run's seed fixes, every class
    among them (a class whose photos set no range could be clipped): the first of the
    draw where they hold every class, else each class's share of it."""
    order = np.random.default_rng(seed).permutation(len(labels))
    drawn: np.ndarray = order[:CALIBRATION_PHOTOS]
    if len(np.unique(labels[drawn])) == len(np.unique(labels)):
        return drawn
    ordered = labels[order]
    share = np.empty(len(order))  # a photo's place within its class, as a fraction
    for label in np.unique(ordered):
        members = np.flatnonzero(ordered == label)
        share[members] = np.arange(len(members)) / len(members)
    picks: np.ndarray = order[np.argsort(share, kind="stable")]
    return picks[:CALIBRATION_PHOTOS]


def quantise(graph: bytes, calibration: np.ndarray) -> bytes:
    """``graph`` (a float32 classifier, see ``onnx_export``) in int8, the activation
    ranges set by ``calibration`` (N×C×S×S photos, 0–255); its metadata kept, the
    standard's operators alone."""
    float_graph = onnx.load_from_string(graph)
    logger = logging.getLogger("root")  # the quantiser warns on the root logger
    with tempfile.TemporaryDirectory(prefix="int8-") as scratch:
        exported = Path(scratch, "float32.onnx")
        prepared, quantised = Path(scratch, "prepared.onnx"), Path(scratch, "int8.onnx")
        exported.write_bytes(graph)  # the quantiser's tools read and write files
        quantization.quant_pre_process(exported, prepared, skip_symbolic_shape=True)
        level = logger.level
        logger.setLevel(logging.ERROR)
        try:
            quantization.quantize_static(
                prepared,
                quantised,
                _Photos(calibration),
                quant_format=quantization.QuantFormat.QDQ,
                per_channel=True,
                reduce_range=False,
                activation_type=quantization.QuantType.QUInt8,
                weight_type=quantization.QuantType.QInt8,
                op_types_to_quantize=QUANTISED_OPS,
                calibrate_method=quantization.CalibrationMethod.MinMax,
            )
        finally:
            logger.setLevel(level)
        int8_graph = onnx.load_model(quantised)
    onnx.helper.set_model_props(
        int8_graph, {prop.key: prop.value for prop in float_graph.metadata_props}
    )
    # the quantiser's optimizer imports every domain ONNX Runtime has; the nodes use the
    # standard's, so the file imports those alone (``read_onnx`` refuses the others)
    used = {""} | {node.domain for node in int8_graph.graph.node}
    imported = [opset for opset in int8_graph.opset_import if opset.domain in used]
    del int8_graph.opset_import[:]
    int8_graph.opset_import.extend(imported)
    serialised: bytes = int8_graph.SerializeToString()
    return serialised


def val_accuracies(
    float_graph: bytes, int8_graph: bytes, batches: Iterable[tuple[np.ndarray, np.ndarray]]
) -> tuple[float, float]:
    """The val split's accuracy scored by each graph in ONNX Runtime: (float32, int8), from
    its ``batches`` of images and labels, read once."""
    scorers = [OnnxScorer(graph, session_threads()) for graph in (float_graph, int8_graph)]
    correct, count = [0, 0], 0
    for images, labels in batches:
        for which, scorer in enumerate(scorers):
            correct[which] += int((score_batches(scorer, images).argmax(1) == labels).sum())
        count += len(labels)
    return correct[0] / max(1, count), correct[1] / max(1, count)
