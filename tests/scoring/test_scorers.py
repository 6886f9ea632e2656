"""Which runtime scores, on how many threads, and within what memory."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from components.scoring import scorers
from tests.support.processes import HANG_SECONDS


@pytest.mark.parametrize(
    "name, device, picked",
    [("auto", "cpu", "onnx"), ("auto", "cuda", "torch"), ("torch", "cpu", "torch")],
)
def test_auto_is_onnx_on_a_cpu_and_torch_on_a_gpu(name, device, picked):
    assert scorers.pick_runtime(name, device) == picked


@pytest.mark.parametrize("name", ["onnx", "onnx-int8"])
def test_onnx_on_a_gpu_and_an_unknown_runtime_are_refused(name):
    with pytest.raises(ValueError, match=f"expected --runtime {name} on a CPU, found device cuda"):
        scorers.pick_runtime(name, "cuda")
    with pytest.raises(
        ValueError, match="expected a runtime of auto, onnx, torch, onnx-int8, found .tvm."
    ):
        scorers.pick_runtime("tvm", "cpu")


@pytest.mark.parametrize("cores, passes, threads", [(2, 1, 2), (8, 2, 4), (2, 4, 1)])
def test_threads_are_the_cores_of_the_pod_shared_by_its_forward_passes(
    monkeypatch, cores, passes, threads
):
    monkeypatch.setattr(scorers, "available_cores", lambda: cores)
    assert scorers.session_threads(passes) == threads


def test_a_graph_that_asks_for_more_memory_than_the_bound_fails_its_call_not_the_process():
    """A crafted graph that expands one number into 400 MB, under a 64 MB bound: the call
    fails with ONNX Runtime's own error, the process lives on and never held the 400 MB."""
    script = textwrap.dedent(
        """
        import resource
        import numpy as np
        from onnx import TensorProto, helper
        from components.scoring import scorers

        scorers.SCORING_MEMORY_MB = 64
        shape = helper.make_tensor("shape", TensorProto.INT64, [2], [1, 100_000_000])
        graph = helper.make_graph(
            [helper.make_node("Expand", ["pixels", "shape"], ["big"]),
             helper.make_node("ReduceSum", ["big"], ["logits"])],
            "bomb",
            [helper.make_tensor_value_info("pixels", TensorProto.FLOAT, [1, 1])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1])],
            [shape],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
        scorer = scorers.OnnxScorer(model.SerializeToString(), 1)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            scorer(np.ones((1, 1), np.float32))
        except Exception as err:
            print("refused:", "smaller than requested bytes of 400000000" in str(err))
        grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
        print("peak grew by MB:", grown // 1024)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_SECONDS
    )
    assert done.returncode == 0, done.stderr[-2000:]
    refused, grown = done.stdout.splitlines()
    assert refused == "refused: True"
    assert int(grown.split()[-1]) <= 64


@pytest.mark.parametrize(
    "said, photos",
    [(10, 6), ("10", 6), ("2", 32), ("1", 64), ("999", 1), ("0", 64), ("9999", 64),
     ("-3", 64), ("ten", 64), (None, 64)],
)  # fmt: skip
def test_a_call_scores_at_most_64_views_whatever_a_models_metadata_says(said, photos):
    """The views a model's metadata says (an ONNX graph's or a logged program's), read as a
    number of up to three digits; anything else counts as one view."""
    assert scorers.photos_a_call(said, 96) == photos


@pytest.mark.parametrize("side, photos", [(50, 32), (128, 32), (192, 14), (260, 7), (2000, 1)])
def test_a_call_of_large_photos_scores_fewer_of_them(side, photos):
    """Two views a photo: 64 views up to 128×128, then as many pixels as those."""
    assert scorers.photos_a_call("2", side) == photos
