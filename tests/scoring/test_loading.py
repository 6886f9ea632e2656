"""Which model a scorer loads: the ONNX file where there is one, torch where there is none
(said once), and an ONNX model outside the data contract refused before it scores."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys

import numpy as np
import onnx
import pytest
import torch

from components.core import identity
from components.core.identity import ModelIdentityError
from components.core.names import INT8_FILE, ONNX_FILE, SPEC_FILE
from components.scoring.loading import load_scorer
from components.scoring.scorers import OnnxScorer, TorchScorer
from tests.support.models import rerecord, seeded_model
from tests.support.processes import HANG_SECONDS
from tests.support.servers import REPO


def test_a_train_output_is_scored_by_onnx_runtime_as_torch_scores_it(tmp_path):
    folder = seeded_model(tmp_path / "model")
    onnx_model, torch_model = load_scorer(str(folder)), load_scorer(str(folder), "torch")
    assert isinstance(onnx_model.scorer, OnnxScorer)
    assert isinstance(torch_model.scorer, TorchScorer)
    assert (
        (onnx_model.channels, onnx_model.image_size)
        == (1, 40)
        == (
            torch_model.channels,
            torch_model.image_size,
        )
    )
    pixels = torch.randint(0, 256, (6, 1, 40, 40)).float().numpy()
    np.testing.assert_allclose(onnx_model.scorer(pixels), torch_model.scorer(pixels), atol=1e-4)


def test_a_model_without_an_onnx_file_is_scored_by_torch_and_the_log_says_so_once(tmp_path, caplog):
    folder = seeded_model(tmp_path / "model")
    (folder / ONNX_FILE).unlink()
    with caplog.at_level(logging.WARNING):
        loaded = load_scorer(str(folder))
    assert isinstance(loaded.scorer, TorchScorer)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [f"{folder} holds no {ONNX_FILE}: scoring with torch"]


def test_a_model_without_an_int8_graph_is_scored_by_its_float_one_and_the_log_says_so(
    tmp_path, caplog
):
    folder = seeded_model(tmp_path / "model")
    with caplog.at_level(logging.INFO):
        loaded = load_scorer(str(folder), "onnx-int8")
    assert isinstance(loaded.scorer, OnnxScorer)
    said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert said == [f"{folder} holds no {INT8_FILE}: scoring its float32 graph"]
    assert "scoring with ONNX Runtime (model.onnx, sha256 " in caplog.text


def test_an_onnx_model_outside_the_data_contract_is_refused(tmp_path):
    """An ONNX file whose input asks for 600×600 photos (the contract stops at 512)."""
    folder = seeded_model(tmp_path / "model")
    graph = onnx.load(folder / ONNX_FILE)
    graph.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 600
    graph.graph.input[0].type.tensor_type.shape.dim[3].dim_value = 600
    onnx.save(graph, folder / ONNX_FILE)
    rerecord(folder)  # recorded as such: the file's own checks refuse it
    with pytest.raises(ValueError, match=r"image_size from \d+ to 512, found 600"):
        load_scorer(str(folder))


def test_an_onnx_model_with_other_inputs_is_refused(tmp_path):
    folder = seeded_model(tmp_path / "model")
    graph = onnx.load(folder / ONNX_FILE)
    graph.graph.input[0].name = "image"
    for node in graph.graph.node:
        node.input[:] = ["image" if name == "pixels" else name for name in node.input]
    onnx.save(graph, folder / ONNX_FILE)
    rerecord(folder)
    with pytest.raises(ValueError, match="one float input 'pixels' of N×C×S×S photos"):
        load_scorer(str(folder))


@pytest.mark.parametrize("runtime", ["onnx", "onnx-int8", "torch"])
def test_a_file_swapped_for_another_models_is_refused_before_any_answer(tmp_path, runtime):
    """The weak run's folder holding a stronger run's graph, int8 graph or weights: each
    loader checks the files it reads against the folder's record and names the file."""
    folder = seeded_model(tmp_path / "weak", seed=0)
    other = seeded_model(tmp_path / "strong", seed=1)
    shutil.copyfile(other / ONNX_FILE, folder / INT8_FILE)  # an int8 file nobody recorded
    swapped = {"onnx": ONNX_FILE, "onnx-int8": INT8_FILE, "torch": "model.pt"}[runtime]
    if swapped != INT8_FILE:
        shutil.copyfile(other / swapped, folder / swapped)
    expected = "records no digest of it" if swapped == INT8_FILE else "its sha256 is"
    with pytest.raises(ModelIdentityError, match=f"refusing {folder / swapped}: .*{expected}"):
        load_scorer(str(folder), runtime)


def test_a_folder_without_its_record_or_with_a_forged_one_is_refused(tmp_path):
    folder = seeded_model(tmp_path / "model")
    (folder / identity.RECORD).write_text('{"sha256": {"model.onnx": "../etc"}}')
    with pytest.raises(
        ModelIdentityError, match="expected a record of file names and their sha256"
    ):
        load_scorer(str(folder))
    (folder / identity.RECORD).unlink()
    with pytest.raises(ModelIdentityError, match="expected identity.json beside the model's files"):
        load_scorer(folder.as_uri())  # a file: URI is the folder it names


@pytest.mark.parametrize("spec_recorded", [True, False], ids=["spec.json", "model.pt alone"])
def test_a_graph_of_another_photo_size_than_its_weights_is_refused(tmp_path, spec_recorded):
    """model.onnx of 48×48 beside model.pt of 40×40 (both recorded): scored, it would
    resize every photo to what the weights never saw. The weights' size is read from
    spec.json, or from model.pt where a folder records no spec.json."""
    folder = seeded_model(tmp_path / "model")
    other = seeded_model(tmp_path / "other", size=48)
    shutil.copyfile(other / ONNX_FILE, folder / ONNX_FILE)
    if not spec_recorded:
        (folder / SPEC_FILE).unlink()
    rerecord(folder)
    with pytest.raises(ValueError, match=r"to take the 1×40² photos .*found a graph of 1×48²"):
        load_scorer(str(folder))


def test_a_train_outputs_graph_is_scored_without_torch(tmp_path):
    """Its digests and spec.json checked, the graph in ONNX Runtime: torch never loads."""
    folder = seeded_model(tmp_path / "model")
    probe = (
        "import sys, numpy as np\n"
        "from components.scoring.loading import load_scorer\n"
        "loaded = load_scorer(sys.argv[1])\n"
        "print(loaded.scorer(np.zeros((2, 1, 40, 40), np.float32)).shape)\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(folder)],
        capture_output=True, text=True, timeout=HANG_SECONDS, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["(2, 2)", "False"]
