"""Exported graphs kept on disk by the net's structure, so that a later process training
the same net (a local sweep's tasks, a step run again) swaps its weights into the kept
graph instead of exporting it again: two to four seconds, most of them the exporter's
start-up.

A kept file is a shape, never trusted: it is read as any ONNX file from outside is
(``read_onnx``: standard operators only, no data outside its folder, bounded by the
model's weights), and ``OnnxGraph`` takes it only when, with the model's weights swapped
in, ONNX Runtime gives eager torch's answers. One file a structure under
``cache_dir()/onnx-graphs``, written whole or not at all; deleting the folder is safe.
"""

from __future__ import annotations

import hashlib
import logging
from importlib.metadata import version
from pathlib import Path

import onnx
import torch

from components.core.atomic import atomic_file
from components.core.cache import cache_dir
from components.scoring import onnx_export
from components.scoring.onnx_file import read_onnx

log = logging.getLogger(__name__)

FOLDER = "onnx-graphs"
OVERHEAD_MB = 8  # what a graph holds besides its weights: nodes, names, shapes


def kept_path(structure: tuple[object, ...]) -> Path:
    """Where the graph of ``structure`` is kept: named by it, the exporter's code and the
    versions of torch, onnxscript and onnx, so that no other export's graph is found."""
    exporter = hashlib.sha256(Path(onnx_export.__file__).read_bytes()).hexdigest()
    made_by = (exporter, str(torch.__version__), version("onnxscript"), version("onnx"))
    key = hashlib.sha256(repr((structure, made_by, onnx_export.OPSET)).encode()).hexdigest()[:40]
    return cache_dir() / FOLDER / f"{key}.onnx"


def load(structure: tuple[object, ...], weight_bytes: int) -> onnx.ModelProto | None:
    """The graph kept for ``structure``; None where there is none, or none that reads as
    a graph of at most ``weight_bytes`` of weights (said in the log)."""
    path = kept_path(structure)
    if not path.is_file():
        return None
    try:
        checked = read_onnx(path, most_mb=weight_bytes / 2**20 + OVERHEAD_MB)
    except (OSError, ValueError) as err:
        log.warning("not taking the kept graph %s: %s", path, err)
        return None
    return onnx.load_model_from_string(checked)


def keep(structure: tuple[object, ...], graph: onnx.ModelProto) -> None:
    """Keep ``graph`` for ``structure``; where the folder cannot be written, say so and
    go on (the next run exports again)."""
    path = kept_path(structure)
    try:
        with atomic_file(path) as handle:
            handle.write(graph.SerializeToString())
    except OSError as err:
        log.info("the exported graph is not kept at %s: %s", path, err)
