"""An ONNX file is data: refused, in one line, when it names code, reaches outside its
folder or is larger than its bound; read whole, external data included, when it is not."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from components.scoring.onnx_file import read_onnx


def doubling_model(weight_domain: str = "", opset_domain: str = "") -> onnx.ModelProto:
    """y = x * w, w = [2, 2]: the smallest model with a weight."""
    weight = numpy_helper.from_array(np.full(2, 2.0, np.float32), "w")
    node = helper.make_node("Mul", ["x", "w"], ["y"], domain=weight_domain)
    graph = helper.make_graph(
        [node],
        "doubling",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [weight],
    )
    opsets = [helper.make_opsetid("", 18)]
    if opset_domain:
        opsets.append(helper.make_opsetid(opset_domain, 1))
    return helper.make_model(graph, opset_imports=opsets)


def with_external_weight(model: onnx.ModelProto, location: str) -> onnx.ModelProto:
    """``model`` whose weight says it lies in the file ``location``."""
    weight = model.graph.initializer[0]
    weight.ClearField("raw_data")
    weight.ClearField("float_data")
    weight.data_location = TensorProto.EXTERNAL
    weight.external_data.add(key="location", value=location)
    return model


def test_a_plain_model_is_read_whole(tmp_path):
    onnx.save(doubling_model(), tmp_path / "model.onnx")
    read = onnx.load_from_string(read_onnx(tmp_path / "model.onnx"))
    assert numpy_helper.to_array(read.graph.initializer[0]).tolist() == [2.0, 2.0]


def test_external_data_inside_the_folder_is_read_in(tmp_path):
    (tmp_path / "weights.bin").write_bytes(np.full(2, 3.0, np.float32).tobytes())
    onnx.save(with_external_weight(doubling_model(), "weights.bin"), tmp_path / "model.onnx")
    read = onnx.load_from_string(read_onnx(tmp_path / "model.onnx"))
    weight = read.graph.initializer[0]
    assert numpy_helper.to_array(weight).tolist() == [3.0, 3.0]
    assert weight.data_location == TensorProto.DEFAULT  # ONNX Runtime reads no file


@pytest.mark.parametrize("location", ["../secret.bin", "/etc/passwd", "sub/../../secret.bin"])
def test_external_data_outside_the_folder_is_refused(tmp_path, location):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
    onnx.save(with_external_weight(doubling_model(), location), folder / "model.onnx")
    with pytest.raises(ValueError, match="expected the external data of 'w' inside .*: a model "):
        read_onnx(folder / "model.onnx")


def test_external_data_through_a_link_out_of_the_folder_is_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "secret.bin").write_bytes(b"\0" * 8)
    (folder / "weights.bin").symlink_to(tmp_path / "secret.bin")
    onnx.save(with_external_weight(doubling_model(), "weights.bin"), folder / "model.onnx")
    with pytest.raises(ValueError, match="reads no file outside its folder"):
        read_onnx(folder / "model.onnx")


@pytest.mark.parametrize(
    "model, said",
    [
        (doubling_model(weight_domain="com.example"), "found 'Mul' of domain 'com.example'"),
        (doubling_model(opset_domain="ai.onnx.contrib"), "operator domain 'ai.onnx.contrib'"),
    ],
)
def test_a_custom_operator_domain_is_refused(tmp_path, model, said):
    onnx.save(model, tmp_path / "model.onnx")
    with pytest.raises(ValueError, match=f"only the ONNX standard's operators .*{said}"):
        read_onnx(tmp_path / "model.onnx")


def test_a_custom_operator_inside_a_subgraph_is_refused(tmp_path):
    """An If node's branch holds the custom operator: the walk goes into subgraphs."""
    inner = doubling_model(weight_domain="com.example").graph
    inner.ClearField("input")
    branch = helper.make_node("If", ["c"], ["y"], then_branch=inner, else_branch=inner)
    graph = helper.make_graph(
        [branch],
        "branching",
        [helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    onnx.save(helper.make_model(graph), tmp_path / "model.onnx")
    with pytest.raises(ValueError, match="found 'Mul' of domain 'com.example'"):
        read_onnx(tmp_path / "model.onnx")


def test_a_file_over_the_size_bound_is_refused_before_it_is_parsed(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"\0" * (2 * 2**20))
    with pytest.raises(ValueError, match="at most 1 MB at .*, found 2 MB"):
        read_onnx(tmp_path / "model.onnx", most_mb=1)


def test_external_data_counts_toward_the_size_bound(tmp_path):
    (tmp_path / "weights.bin").write_bytes(b"\0" * (2 * 2**20))
    onnx.save(with_external_weight(doubling_model(), "weights.bin"), tmp_path / "model.onnx")
    with pytest.raises(ValueError, match="at most 1 MB with its external data"):
        read_onnx(tmp_path / "model.onnx", most_mb=1)


def test_a_file_that_is_no_onnx_model_is_one_line(tmp_path):
    (tmp_path / "model.onnx").write_bytes(b"\xff" * 64)
    with pytest.raises(ValueError, match="expected an ONNX model at .*, found a file that does"):
        read_onnx(tmp_path / "model.onnx")


def single_node_model(node: onnx.NodeProto, *initializers: TensorProto) -> onnx.ModelProto:
    """A graph of one node from ``x`` (float, 2) to ``y``."""
    graph = helper.make_graph(
        [node],
        "crafted",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        list(initializers),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def int64s(name: str, values: list[int]) -> TensorProto:
    return numpy_helper.from_array(np.array(values, np.int64), name)


@pytest.mark.parametrize(
    "model, said",
    [
        (
            single_node_model(
                helper.make_node("ConstantOfShape", ["s"], ["y"]), int64s("s", [2**31])
            ),
            "found 'ConstantOfShape'",
        ),
        (
            single_node_model(
                helper.make_node("Expand", ["x", "s"], ["y"]), int64s("s", [2**31, 2])
            ),
            "found 'Expand'",
        ),
        (
            single_node_model(helper.make_node("Tile", ["x", "r"], ["y"]), int64s("r", [4000])),
            "found 'Tile'",
        ),
        (
            single_node_model(helper.make_node("Pad", ["x", "p"], ["y"]), int64s("p", [0, 10**9])),
            "to add at most 64 pixels a side",
        ),
        (
            single_node_model(helper.make_node("Pad", ["x", "p"], ["y"])),  # pads from data
            "to add at most 64 pixels a side, given as a constant",
        ),
    ],
)
def test_an_operator_a_classifier_is_not_made_of_is_refused_naming_it(tmp_path, model, said):
    """Operators that loop, branch or size a tensor from data are no part of this
    project's classifiers: refused before ONNX Runtime sees the graph."""
    onnx.save(model, tmp_path / "model.onnx")
    with pytest.raises(ValueError, match=said):
        read_onnx(tmp_path / "model.onnx")


def test_a_string_tensor_is_refused_its_memory_is_outside_the_bound(tmp_path):
    words = helper.make_tensor("words", TensorProto.STRING, [1], [b"x" * 2**20])
    model = single_node_model(helper.make_node("Identity", ["words"], ["y"]), words)
    onnx.save(model, tmp_path / "model.onnx")
    with pytest.raises(ValueError, match="found 'words' of type STRING"):
        read_onnx(tmp_path / "model.onnx")


@pytest.mark.parametrize(
    "change, said",
    [
        (lambda m: setattr(m, "ir_version", 99), "found IR version 99"),
        (
            lambda m: setattr(m.opset_import[0], "version", 99),
            r"found IR version \d+ and opsets \[99\]",
        ),
        (
            lambda m: m.graph.initializer[0].dims.__setitem__(0, 2**40),
            "to hold the .* bytes its shape",
        ),
    ],
)
def test_a_file_of_the_future_or_a_tensor_larger_than_its_data_is_one_line(tmp_path, change, said):
    model = doubling_model()
    change(model)
    onnx.save(model, tmp_path / "model.onnx")
    with pytest.raises(ValueError, match=said):
        read_onnx(tmp_path / "model.onnx")


def test_one_external_file_named_by_many_tensors_counts_each_time(tmp_path):
    """A 1 MB file read by 30 tensors is 30 MB read: counted so, against a 16 MB bound."""
    (tmp_path / "weights.bin").write_bytes(b"\0" * 2**20)
    model = doubling_model()
    model.graph.ClearField("initializer")
    for index in range(30):
        weight = TensorProto(name=f"w{index}", data_type=TensorProto.FLOAT, dims=[2**18])
        weight.data_location = TensorProto.EXTERNAL
        weight.external_data.add(key="location", value="weights.bin")
        model.graph.initializer.append(weight)
    onnx.save(model, tmp_path / "model.onnx")
    with pytest.raises(ValueError, match="every reference counted, found 30 MB"):
        read_onnx(tmp_path / "model.onnx", most_mb=16)


def test_external_data_through_a_hard_link_is_refused(tmp_path):
    (tmp_path / "elsewhere.bin").write_bytes(np.full(2, 3.0, np.float32).tobytes())
    folder = tmp_path / "model"
    folder.mkdir()
    os.link(tmp_path / "elsewhere.bin", folder / "weights.bin")
    onnx.save(with_external_weight(doubling_model(), "weights.bin"), folder / "model.onnx")
    with pytest.raises(ValueError, match="found a hard link to another file"):
        read_onnx(folder / "model.onnx")


def test_more_tensors_than_a_classifier_holds_are_refused_before_a_session(tmp_path):
    """Unused one-float initializers: small on disk, each one a tensor a session builds."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["pixels"], ["logits"])],
        "many",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", 1, 40, 40])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 2])],
        [numpy_helper.from_array(np.ones(1, np.float32), f"w{i}") for i in range(10_001)],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph), path)
    with pytest.raises(ValueError, match="expected at most 10000 tensors in .*, found more"):
        read_onnx(path)


def test_a_sparse_initializer_of_a_huge_dense_shape_is_refused_before_a_session(tmp_path):
    """A few kilobytes that declare a gigabyte: one stored value of a [2**28] float tensor."""
    model = doubling_model()
    values = numpy_helper.from_array(np.array([1.0], np.float32), "huge")
    indices = numpy_helper.from_array(np.array([0], np.int64), "huge_indices")
    model.graph.sparse_initializer.append(helper.make_sparse_tensor(values, indices, [2**28]))
    path = tmp_path / "model.onnx"
    onnx.save_model(model, path)
    assert path.stat().st_size < 4096
    with pytest.raises(
        ValueError, match=r"found the sparse initializer 'huge' of dense shape \[268435456\]"
    ):
        read_onnx(path)


def test_a_graph_of_too_many_multiply_adds_a_photo_is_refused_before_a_session(tmp_path):
    """Allowed operators, small weights: eight 64-pixel pads grow a 64-pixel photo to 1,088
    pixels a side, and one 11×11 convolution to 96 channels then takes 40 billion
    multiply-adds a photo, in one node that no stop flag interrupts."""
    pads = int64s("pads", [0, 0, 64, 64, 0, 0, 64, 64])
    nodes = [
        helper.make_node("Pad", ["x" if i == 0 else f"p{i}", "pads"], [f"p{i + 1}"])
        for i in range(8)
    ]
    weight = numpy_helper.from_array(np.zeros((96, 3, 11, 11), np.float32), "w")
    nodes.append(helper.make_node("Conv", ["p8", "w"], ["y"]))
    graph = helper.make_graph(
        nodes,
        "padded",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [pads, weight],
    )
    path = tmp_path / "model.onnx"
    onnx.save_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), path)
    with pytest.raises(
        ValueError, match="at most 16 billion multiply-adds a photo .* found 40 billion"
    ):
        read_onnx(path)
