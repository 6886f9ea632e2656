"""Reading an ONNX model file as data: nothing in it may name code, reach outside its
folder or take more memory than its bound.

ONNX Runtime runs the operators it ships; a file asks for others by a domain (a custom
operator library), and for weights held elsewhere by a path (external data). A model
from a registry or a bucket is untrusted, so both are checked before ONNX Runtime sees
it, and it gets the checked bytes, never the path.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import onnx
from onnx import external_data_helper, numpy_helper

INPUT, OUTPUT = "pixels", "logits"  # the graph's input (N×C×S×S photos) and output (N×K)
VIEWS = "views"  # the graph's metadata: the views of a photo it scores
# the classifiers are 1–45 MB; with their external data, if any. Loading takes about 4.1
# times the weights laid out as external data (3.1 inline) above the process's own: the
# model server peaks at 724 MB on 128 MB of weights, which leaves room in its pod's 2 GiB
# for ONNX Runtime's 1 GiB arena (docs/safety.md, benchmarks/onnx_load_peak.py)
MOST_ONNX_MB = 128
STANDARD_DOMAINS = ("", "ai.onnx")  # the ONNX standard's operators
# what the project's exports are made of (every net, its views, its int8 graph), and a few
# of their kind: each one's output is bounded by its inputs and weights, and none loops,
# branches, or makes a tensor of a size it reads from data (Loop, Tile, Expand,
# ConstantOfShape, Resize, Range are refused)
OPERATORS = frozenset(
    {
        *("Add", "AveragePool", "BatchNormalization", "Clip", "Concat", "Conv"),
        "DequantizeLinear",
        *("Div", "Flatten", "Gemm", "GlobalAveragePool", "Identity", "LogSoftmax", "MatMul"),
        *("MaxPool", "Mul", "Pad", "QuantizeLinear", "ReduceLogSumExp", "ReduceMean", "Relu"),
        *("Reshape", "Slice", "Softmax", "Sub", "Transpose"),
    }
)
# float32, uint8, int8, int32 (int8 biases), int64 (shapes, pads): no strings, whose
# memory lies outside ONNX Runtime's bounded arena
TENSOR_TYPES = frozenset(
    {
        onnx.TensorProto.FLOAT,
        onnx.TensorProto.UINT8,
        onnx.TensorProto.INT8,
        onnx.TensorProto.INT32,
        onnx.TensorProto.INT64,
    }
)
MOST_PAD = 64  # pixels a Pad may add on a side (the shifted views pad 4)
# ONNX Runtime's session takes about 2.1 KB a node and builds in time that grows with the
# nodes, the tensors and the edges between them, whatever their bytes: a 26 MB graph of a
# million Adds fills gigabytes. The project's largest graph (EfficientNet-Lite with its
# views, in int8) has under 2,000 nodes and tensors
MOST_NODES, MOST_TENSORS, MOST_EDGES = 10_000, 10_000, 40_000
# multiply-adds a row of a batch may take (a photo, or one view of it), counted from the
# shapes before a session is built: ONNX Runtime stops a call only between nodes, so one
# node must not outlast the call bound. EfficientNet-Lite2 at 260 px takes 0.86 billion,
# resnet18 at 128 px 0.6; eight 64-pixel pads before one large kernel would take 29,000
MOST_MACS_A_ROW = 16e9


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
    _check_versions(model, path)
    _check_counts(model, path)
    _check_domains(model, path)
    _check_operators(model, path)
    _check_dense(model, path)
    _check_compute(model, path)
    _check_types(model, path)
    external = _external_reads(model, path.parent)
    total = size + sum(external)
    if total > most:
        raise ValueError(
            f"expected an ONNX model of at most {most_mb:g} MB with its external data at "
            f"{path}, every reference counted, found {total / 2**20:.0f} MB"
        )
    for tensor in _tensors(model):
        if external_data_helper.uses_external_data(tensor):
            try:
                external_data_helper.load_external_data_for_tensor(tensor, str(path.parent))
            except (OSError, ValueError) as err:
                raise ValueError(
                    f"cannot read the external data of {tensor.name!r:.100} in {path}: {err!s:.200}"
                ) from None
    _check_sizes(model, path)
    checked: bytes = model.SerializeToString()
    return checked


def _check_versions(model: onnx.ModelProto, path: Path) -> None:
    """Refuse an IR or opset version newer than this onnx knows (a file of the future
    is no file of this project's)."""
    opsets = [opset.version for opset in model.opset_import if opset.domain in STANDARD_DOMAINS]
    newest = onnx.defs.onnx_opset_version()
    if not 3 <= model.ir_version <= onnx.IR_VERSION or not all(1 <= v <= newest for v in opsets):
        raise ValueError(
            f"expected an ONNX model of IR version 3 to {onnx.IR_VERSION} and opset 1 to "
            f"{newest} at {path}, found IR version {model.ir_version} and opsets {opsets}"
        )


def _check_counts(model: onnx.ModelProto, path: Path) -> None:
    """Refuse more nodes, tensors or edges than a classifier of this project has: what
    a session costs grows with them, not with the file's bytes."""
    nodes = tensors = edges = 0
    for node in _nodes(model):
        nodes += 1
        edges += len(node.input) + len(node.output)
        if nodes > MOST_NODES or edges > MOST_EDGES:
            raise ValueError(
                f"expected a graph of at most {MOST_NODES} nodes and {MOST_EDGES} edges in "
                f"{path}, found more"
            )
    for _ in _tensors(model):
        tensors += 1
        if tensors > MOST_TENSORS:
            raise ValueError(f"expected at most {MOST_TENSORS} tensors in {path}, found more")


def _check_operators(model: onnx.ModelProto, path: Path) -> None:
    """Refuse local functions and any operator outside ``OPERATORS``; a Pad only with
    constant pads of at most ``MOST_PAD``."""
    if model.functions:
        raise ValueError(
            f"expected a graph of plain operators in {path}, found {len(model.functions)} "
            "local functions"
        )
    constants = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in _nodes(model):
        if node.op_type not in OPERATORS:
            raise ValueError(
                f"expected only the operators a classifier of this project is made of in "
                f"{path} ({', '.join(sorted(OPERATORS))}), found {node.op_type!r:.100}"
            )
        if node.op_type == "Pad" and not _bounded_pads(node, constants):
            raise ValueError(
                f"expected each Pad in {path} to add at most {MOST_PAD} pixels a side, given "
                f"as a constant, found {node.name!r:.100} padding by {list(node.input)[1:2]}"
            )


def _bounded_pads(node: onnx.NodeProto, constants: dict[str, onnx.TensorProto]) -> bool:
    pads = constants.get(node.input[1]) if len(node.input) > 1 else None
    if pads is None or pads.data_type != onnx.TensorProto.INT64 or len(pads.dims) != 1:
        return False
    if not 0 < pads.dims[0] <= 16:
        return False
    values = numpy_helper.to_array(pads)
    return bool(((values >= 0) & (values <= MOST_PAD)).all())


def _check_compute(model: onnx.ModelProto, path: Path) -> None:
    """Refuse a graph whose convolutions and matrix products take more than
    ``MOST_MACS_A_ROW`` multiply-adds for a row of a batch, or whose sizes cannot be told
    from its shapes (then neither can its time)."""
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    known = {tensor.name: list(tensor.dims) for tensor in graph.initializer}
    for value in (*graph.input, *graph.value_info, *graph.output):
        dims = value.type.tensor_type.shape.dim
        known.setdefault(value.name, [d.dim_value if d.HasField("dim_value") else 0 for d in dims])
    total = 0
    for node in graph.node:
        if node.op_type not in ("Conv", "Gemm", "MatMul"):
            continue
        output, weight = known.get(node.output[0], []), known.get(node.input[1], [])
        if len(output) < 2 or len(weight) < 2 or 0 in output[1:] or 0 in weight:
            raise ValueError(
                f"expected every convolution and matrix product in {path} to have sizes its "
                f"shapes tell, found {node.op_type} {node.name!r:.100} without them"
            )
        per_output = math.prod(weight[1:]) if node.op_type == "Conv" else _inner(node, weight)
        total += math.prod(output[1:]) * per_output
    if total > MOST_MACS_A_ROW:
        raise ValueError(
            f"expected a graph of at most {MOST_MACS_A_ROW / 1e9:g} billion multiply-adds a "
            f"photo in {path}, found {total / 1e9:,.0f} billion: it would outrun the call bound"
        )


def _inner(node: onnx.NodeProto, weight: list[int]) -> int:
    """The length of the products a matrix product sums: its weight's rows, or its columns
    where Gemm transposes it."""
    transposed = any(a.name == "transB" and a.i for a in node.attribute)
    return weight[-1] if transposed else weight[-2]


def _check_dense(model: onnx.ModelProto, path: Path) -> None:
    """Refuse sparse tensors: a few stored values may declare a dense shape of any size,
    which ONNX Runtime makes whole when it builds a session. No graph the project writes
    holds one."""
    for graph in _graphs(model):
        for sparse in graph.sparse_initializer:
            raise ValueError(
                f"expected dense tensors in {path}, found the sparse initializer "
                f"{sparse.values.name!r:.100} of dense shape {list(sparse.dims)[:8]}"
            )
    for node in _nodes(model):
        for attribute in node.attribute:
            if attribute.HasField("sparse_tensor") or attribute.sparse_tensors:
                raise ValueError(
                    f"expected dense tensors in {path}, found a sparse tensor in "
                    f"{node.op_type!r:.100}'s attribute {attribute.name!r:.100}"
                )


def _check_types(model: onnx.ModelProto, path: Path) -> None:
    """Refuse a tensor, an input, an output or a value of a type outside ``TENSOR_TYPES``."""
    graph = model.graph
    declared = [
        (value.name, value.type.tensor_type.elem_type)
        for value in (*graph.input, *graph.output, *graph.value_info)
    ]
    held = [(tensor.name, tensor.data_type) for tensor in _tensors(model)]
    for name, kind in declared + held:
        if kind not in TENSOR_TYPES:
            found = onnx.TensorProto.DataType.Name(kind) if kind in range(1, 30) else kind
            raise ValueError(
                f"expected tensors of numbers in {path} (float, uint8, int8, int32, int64), "
                f"found {name!r:.100} of type {found}"
            )


def _check_sizes(model: onnx.ModelProto, path: Path) -> None:
    """Refuse a tensor whose data is not the size its shape declares."""
    for tensor in _tensors(model):
        if any(dim < 0 for dim in tensor.dims):
            raise ValueError(
                f"expected tensor sizes of 0 or more in {path}, found {tensor.name!r:.100}"
            )
        count = 1
        for dim in tensor.dims:
            count *= dim
        itemsize = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type).itemsize
        typed = len(tensor.float_data) + len(tensor.int32_data) + len(tensor.int64_data)
        found = len(tensor.raw_data) if tensor.HasField("raw_data") else typed * itemsize
        if found != count * itemsize:
            raise ValueError(
                f"expected {tensor.name!r:.100} in {path} to hold the {count * itemsize} bytes "
                f"its shape {list(tensor.dims)[:8]} declares, found {found}"
            )


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


def _external_reads(model: onnx.ModelProto, folder: Path) -> list[int]:
    """The bytes each reference to external data reads, every reference counted (one
    file named by many tensors is read as often), each file checked to be a plain file
    of ``folder``."""
    inside, reads = folder.resolve(), []
    for tensor in _tensors(model):
        if not external_data_helper.uses_external_data(tensor):
            continue
        entries = {entry.key: entry.value for entry in tensor.external_data}
        location = entries.get("location", "")
        file = (folder / location).resolve()
        if not location or Path(location).is_absolute() or not file.is_relative_to(inside):
            raise ValueError(
                f"expected the external data of {tensor.name!r:.100} inside {folder}, found "
                f"{location!r:.200}: a model reads no file outside its folder"
            )
        if not file.is_file() or (folder / location).is_symlink():
            raise ValueError(
                f"expected the external data file {location!r:.200} in {folder}, found none"
            )
        if file.stat().st_nlink > 1:
            raise ValueError(
                f"expected the external data file {location!r:.200} in {folder} to be its own, "
                "found a hard link to another file"
            )
        offset, length = entries.get("offset", "0"), entries.get("length")
        if not offset.isdigit() or (length is not None and not length.isdigit()):
            raise ValueError(
                f"expected whole-number offset and length for {tensor.name!r:.100}'s external "
                f"data, found {offset!r:.40} and {length!r:.40}"
            )
        reads.append(int(length) if length is not None else file.stat().st_size - int(offset))
    return reads


def _nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node: of the graph, its subgraphs (If, Loop, Scan) and its local functions."""
    pending: list[onnx.GraphProto | onnx.FunctionProto] = [model.graph, *model.functions]
    while pending:
        for node in pending.pop().node:
            yield node
            for attribute in node.attribute:
                pending += [attribute.g] if attribute.HasField("g") else []
                pending += list(attribute.graphs)


def _graphs(model: onnx.ModelProto) -> Iterator[onnx.GraphProto]:
    """The graph and its subgraphs (If, Loop, Scan)."""
    pending = [model.graph]
    while pending:
        graph = pending.pop()
        yield graph
        for node in graph.node:
            for attribute in node.attribute:
                pending += [attribute.g] if attribute.HasField("g") else []
                pending += list(attribute.graphs)


def _tensors(model: onnx.ModelProto) -> Iterator[onnx.TensorProto]:
    """Every tensor that can hold data: initializers, sparse ones and constants, in the
    graph and its subgraphs."""
    for graph in _graphs(model):
        yield from graph.initializer
        for sparse in graph.sparse_initializer:
            yield from (sparse.values, sparse.indices)
    for node in _nodes(model):
        for attribute in node.attribute:
            yield from [attribute.t] if attribute.HasField("t") else []
            yield from attribute.tensors
            sparse_values = [attribute.sparse_tensor] if attribute.HasField("sparse_tensor") else []
            for sparse in [*sparse_values, *attribute.sparse_tensors]:
                yield from (sparse.values, sparse.indices)
