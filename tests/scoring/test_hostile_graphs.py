"""Crafted ONNX graphs in a model folder, with a record that vouches for them (whoever
writes a folder can write its ``identity.json``): predict ends with one line, in bounded
time and memory, and a call that runs too long is stopped, its thread freed."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from components.scoring import scorers
from components.scoring.scorers import OnnxScorer, ScoringTimeoutError
from tests.support.models import rerecord, seeded_model

pytestmark = pytest.mark.slow
MOST_SECONDS = 180
MOST_PEAK_MB = 1536


def classifier_graph(nodes: list, initializers: list) -> onnx.ModelProto:
    """``pixels`` (N×1×40×40) in, ``logits`` (N×2) out, through ``nodes``."""
    graph = helper.make_graph(
        nodes,
        "crafted",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", 1, 40, 40])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["n", 2])],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def external_thirty_times(folder) -> onnx.ModelProto:
    """One 50 MB file named by 30 tensors: 1.5 GB once each is read."""
    (folder / "weights.bin").write_bytes(b"\0" * (50 * 2**20))
    tensors, nodes, last = [], [], "pixels"
    for index in range(30):
        weight = TensorProto(name=f"w{index}", data_type=TensorProto.FLOAT, dims=[50 * 2**18])
        weight.data_location = TensorProto.EXTERNAL
        weight.external_data.add(key="location", value="weights.bin")
        tensors.append(weight)
        nodes.append(helper.make_node("Add", [last, f"w{index}"], [f"a{index}"]))
        last = f"a{index}"
    nodes.append(helper.make_node("Identity", [last], ["logits"]))
    return classifier_graph(nodes, tensors)


def thirty_external_files(folder, megabytes: int = 150) -> onnx.ModelProto:
    """30 files of external data, each named once, of allowed operators: under the old
    512 MB bound, yet 480 MB of them took the model server past its pod's 2 GiB."""
    floats = megabytes * 2**18 // 30
    tensors, nodes, last = [], [], "pixels"
    for index in range(30):
        (folder / f"w{index}.bin").write_bytes(b"\0" * (floats * 4))
        weight = TensorProto(name=f"w{index}", data_type=TensorProto.FLOAT, dims=[floats])
        weight.data_location = TensorProto.EXTERNAL
        weight.external_data.add(key="location", value=f"w{index}.bin")
        tensors.append(weight)
        nodes.append(helper.make_node("Add", [last, f"w{index}"], [f"a{index}"]))
        last = f"a{index}"
    nodes.append(helper.make_node("Identity", [last], ["logits"]))
    return classifier_graph(nodes, tensors)


def string_tile(folder) -> onnx.ModelProto:
    """A 1 MiB string tiled 4,000 times a photo: 4 GB of strings, outside the arena."""
    word = helper.make_tensor("word", TensorProto.STRING, [1], [b"x" * 2**20])
    repeats = numpy_helper.from_array(np.array([4000], np.int64), "repeats")
    nodes = [
        helper.make_node("Tile", ["word", "repeats"], ["words"]),
        helper.make_node("Identity", ["pixels"], ["logits"]),
    ]
    return classifier_graph(nodes, [word, repeats])


def endless_loop(folder) -> onnx.ModelProto:
    """A Loop whose trip count (10^12) is read from the photo's first pixel times 10^12."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, [])],
    )
    trips = numpy_helper.from_array(np.array(10**12, np.int64), "trips")
    nodes = [
        helper.make_node("Loop", ["trips", ""], [], body=body),
        helper.make_node("Identity", ["pixels"], ["logits"]),
    ]
    return classifier_graph(nodes, [trips])


def many_adds(folder, count: int = 100_000) -> onnx.ModelProto:
    """Allowed operators, small on disk: a session of them takes about 2.1 KB a node."""
    nodes = [helper.make_node("Add", [f"a{i}", "pixels"], [f"a{i + 1}"]) for i in range(count)]
    nodes[0].input[0] = "pixels"
    nodes.append(helper.make_node("Identity", [f"a{count}"], ["logits"]))
    return classifier_graph(nodes, [])


def many_initializers(folder, count: int = 100_000) -> onnx.ModelProto:
    """One-float initializers joined by one Concat: a session that takes minutes to build."""
    tensors = [numpy_helper.from_array(np.ones(1, np.float32), f"w{i}") for i in range(count)]
    nodes = [
        helper.make_node("Concat", [t.name for t in tensors], ["joined"], axis=0),
        helper.make_node("Identity", ["pixels"], ["logits"]),
    ]
    return classifier_graph(nodes, tensors)


@pytest.mark.parametrize(
    "craft, said",
    [
        (many_adds, "at most 10000 nodes and 40000 edges"),
        (many_initializers, "and 40000 edges"),
        (external_thirty_times, "every reference counted, found 1500 MB"),
        (thirty_external_files, "at most 128 MB with its external data"),
        (string_tile, "found 'Tile'"),
        (endless_loop, "found 'Loop'"),
    ],
)
def test_predict_over_a_crafted_graph_ends_in_one_line_in_bounded_time_and_memory(
    tmp_path, sample_images, craft, said
):
    folder = seeded_model(tmp_path / "model")
    onnx.save(craft(folder), folder / "model.onnx")
    rerecord(folder)
    measured = textwrap.dedent(
        f"""
        import resource, subprocess, sys
        done = subprocess.run(
            [sys.executable, "-m", "components.predict", "--model", {str(folder)!r},
             {str(sample_images / "PetImages/Dog/1.jpg")!r}],
            capture_output=True, text=True, timeout={MOST_SECONDS},
        )
        print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)
        print(done.stderr, file=sys.stderr)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", measured], capture_output=True, text=True, timeout=MOST_SECONDS + 30
    )
    status, peak_mb = map(int, done.stdout.split())
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert status == 1 and len(errors) == 1 and said in errors[0], done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert peak_mb < MOST_PEAK_MB


def test_a_call_that_runs_past_its_bound_is_stopped_and_the_scorer_answers_again(monkeypatch):
    """Twenty 64-channel convolutions on 128×128 (allowed operators, a second or so on two
    cores) under a 20 ms bound: ONNX Runtime's terminate flag stops the call between
    nodes; the same scorer then answers a call it has time for."""
    convs = [helper.make_node("Conv", ["pixels", "w0"], ["c0"], pads=[1, 1, 1, 1])]
    weights = [numpy_helper.from_array(np.full((64, 1, 3, 3), 0.01, np.float32), "w0")]
    for index in range(1, 20):
        weights.append(
            numpy_helper.from_array(np.full((64, 64, 3, 3), 0.01, np.float32), f"w{index}")
        )
        convs.append(
            helper.make_node(
                "Conv", [f"c{index - 1}", f"w{index}"], [f"c{index}"], pads=[1, 1, 1, 1]
            )
        )
    weights.append(numpy_helper.from_array(np.array([2, 3], np.int64), "axes"))
    convs.append(helper.make_node("ReduceMean", ["c19", "axes"], ["logits"], keepdims=0))
    graph = helper.make_graph(
        convs,
        "slow",
        [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, ["n", 1, 128, 128])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    scorer = OnnxScorer(model.SerializeToString(), 2)
    monkeypatch.setattr(scorers, "CALL_SECONDS", 0.02)
    with pytest.raises(ScoringTimeoutError, match="within 0.02 s, found it still running; stopped"):
        scorer(np.ones((1, 1, 128, 128), np.float32))
    monkeypatch.setattr(scorers, "CALL_SECONDS", 600.0)
    assert scorer(np.ones((1, 1, 128, 128), np.float32)).shape == (1, 64)
