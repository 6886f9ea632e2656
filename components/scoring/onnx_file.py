"""Reading an ONNX model file as data: nothing in it may name code, reach outside its
folder or take more memory than its bound.

ONNX Runtime runs the operators it ships; a file asks for others by a domain (a custom
operator library), and for weights held elsewhere by a path (external data). A model
from a registry or a bucket is untrusted, so both are checked before ONNX Runtime sees
it, and it gets the checked bytes, never the path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import external_data_helper

ONNX_FILE = "model.onnx"  # beside model.pt in a train output, and in the MLflow model
INT8_FILE = "model.int8.onnx"  # the same graph in int8, where training was asked for it
INPUT, OUTPUT = "pixels", "logits"  # the graph's input (N×C×S×S photos) and output (N×2)
VIEWS = "views"  # the graph's metadata: the views of a photo it scores
MOST_ONNX_MB = 512  # the classifiers are 1–45 MB; with their external data, if any
STANDARD_DOMAINS = ("", "ai.onnx")  # the ONNX standard's operators


def read_onnx(path: Path, most_mb: float = MOST_ONNX_MB) -> bytes:
    """The bytes of the ONNX model at ``path``, any external data read in, once checked.

    Raises:
        ValueError: a file (with its external data) over ``most_mb``, not an ONNX model,
            an operator outside the ONNX standard, or external data outside its folder.
    """
    most = int(most_mb * 2**20)
    size = path.stat().st_size
    if size > most:
        raise ValueError(
            f"expected an ONNX model of at most {most_mb:g} MB at {path}, found "
            f"{size / 2**20:.0f} MB"
        )
    try:
        model = onnx.load_model(path, load_external_data=False)
    except Exception as err:  # noqa: BLE001 - protobuf raises its own kinds on a bad file
        raise ValueError(
            f"expected an ONNX model at {path}, found a file that does not parse "
            f"({type(err).__name__})"
        ) from err
    _check_domains(model, path)
    external = _external_files(model, path.parent)
    total = size + sum(file.stat().st_size for file in set(external))
    if total > most:
        raise ValueError(
            f"expected an ONNX model of at most {most_mb:g} MB with its external data at "
            f"{path}, found {total / 2**20:.0f} MB"
        )
    for tensor in _tensors(model):
        if external_data_helper.uses_external_data(tensor):
            external_data_helper.load_external_data_for_tensor(tensor, str(path.parent))
    checked: bytes = model.SerializeToString()
    return checked


def _check_domains(model: onnx.ModelProto, path: Path) -> None:
    """Refuse operators outside the standard: a custom domain names code to load."""
    for opset in model.opset_import:
        if opset.domain not in STANDARD_DOMAINS:
            raise ValueError(
                f"expected only the ONNX standard's operators in {path}, found the "
                f"operator domain {opset.domain!r:.100}: custom operators are refused"
            )
    for node in _nodes(model):
        if node.domain not in STANDARD_DOMAINS:
            raise ValueError(
                f"expected only the ONNX standard's operators in {path}, found "
                f"{node.op_type!r:.100} of domain {node.domain!r:.100}: custom operators are "
                "refused"
            )


def _external_files(model: onnx.ModelProto, folder: Path) -> list[Path]:
    """The files the model's external data lie in, each checked to be in ``folder``."""
    inside, files = folder.resolve(), []
    for tensor in _tensors(model):
        if not external_data_helper.uses_external_data(tensor):
            continue
        location = {entry.key: entry.value for entry in tensor.external_data}.get("location", "")
        file = (folder / location).resolve()
        if not location or Path(location).is_absolute() or not file.is_relative_to(inside):
            raise ValueError(
                f"expected the external data of {tensor.name!r:.100} inside {folder}, found "
                f"{location!r:.200}: a model reads no file outside its folder"
            )
        if not file.is_file():
            raise ValueError(
                f"expected the external data file {location!r:.200} in {folder}, found none"
            )
        files.append(file)
    return files


def _nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node: of the graph, its subgraphs (If, Loop, Scan) and its local functions."""
    pending: list[onnx.GraphProto | onnx.FunctionProto] = [model.graph, *model.functions]
    while pending:
        for node in pending.pop().node:
            yield node
            for attribute in node.attribute:
                pending += [attribute.g] if attribute.HasField("g") else []
                pending += list(attribute.graphs)


def _tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor that can hold data: initializers, sparse ones and constants, in the
    graph and its subgraphs."""
    pending = [model.graph]
    while pending:
        graph = pending.pop()
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield from (sparse.values, sparse.indices)
        for node in graph.node:
            for attribute in node.attribute:
                pending += [attribute.g] if attribute.HasField("g") else []
                pending += list(attribute.graphs)
    for node in _nodes(model):
        for attribute in node.attribute:
            yield from [attribute.t] if attribute.HasField("t") else []
            yield from attribute.tensors
            sparse_values = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
            for sparse in [*sparse_values, *attribute.sparse_tensors]:
                yield from (sparse.values, sparse.indices)
