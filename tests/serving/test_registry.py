"""Serving a registered model the way the cluster does: ``components.serve`` loads it by
MLflow URI through a real tracking server (PostgreSQL, the deployment's flags) whose
artifacts are proxied into a real SeaweedFS, and answers as ``predict`` does for that URI."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
from pathlib import Path

import mlflow
import numpy as np
import pytest
import requests
from mlflow.tracking import MlflowClient

from components import fetch_model, serve
from components.core.int8_cpu import multiplies_int8_exactly
from components.core.names import INT8_FILE, ONNX_FILE
from components.evaluation.predictions import predict_files
from components.scoring import int8
from components.tracking import logged_models
from tests.support.processes import HANG_SECONDS
from tests.support.servers import S3_KEYS, ModelServerProcess, has_mapped
from tests.support.tracking_stack import register_trained_model

pytestmark = pytest.mark.integration
NAME = "dogs-vs-cats-serving-test"


@pytest.fixture(scope="module")
def registered(running_server, small_arrays, tmp_path_factory):
    """A model trained and logged through the server, registered as version 1 @candidate;
    (the run id, the tracking server's URL). Two views a photo, averaged in its graph (the
    ten-view graph is held to torch in tests/scoring/test_onnx_export.py), and its int8
    graph (kept whatever its val accuracy: tests/scoring/test_int8.py tests the gate)."""
    workdir = tmp_path_factory.mktemp("registry")
    recipe = {"mirror_average": True, "int8": True}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(int8, "MOST_POINTS_LOST", 100.0)
        run_id = register_trained_model(running_server.url, small_arrays, workdir, NAME, **recipe)
    return run_id, running_server.url


@pytest.fixture(scope="module")
def photos(sample_images) -> list:
    cats = sorted((sample_images / "PetImages/Cat").glob("*.jpg"))[:3]
    return [*cats, *sorted((sample_images / "PetImages/Dog").glob("*.jpg"))[:3]]


def served_answers(
    model: str, photos: list, workdir, env: dict, *flags: str, per_request: int = 64
) -> list[dict]:
    """What ``components.serve --model MODEL FLAGS`` answers to V1 requests of ``photos``,
    ``per_request`` photos each, in order; served by ONNX Runtime, without torch loaded."""
    answers = []
    with ModelServerProcess(model, workdir, *flags, env=env) as server:
        assert not has_mapped(server.process.pid, "libtorch_cpu")  # half the memory, a faster start
        for start in range(0, len(photos), per_request):
            chunk = photos[start : start + per_request]
            body = {
                "instances": [
                    {"image": {"b64": base64.b64encode(p.read_bytes()).decode()}} for p in chunk
                ]
            }
            answer = requests.post(
                f"{server.url}/v1/models/dogs-vs-cats:predict", json=body, timeout=HANG_SECONDS
            )
            assert answer.status_code == 200, answer.text
            answers += answer.json()["predictions"]
    return answers


@pytest.mark.parametrize(
    "uri", [f"models:/{NAME}/1", "runs:/{run_id}/model"]
)  # models:/NAME@candidate: served against predict for every photo of the sample, below
def test_a_registered_model_is_served_as_predict_classifies_it(
    uri, registered, photos, tmp_path, monkeypatch
):
    run_id, tracking_url = registered
    uri = uri.format(run_id=run_id)
    env = {k: v for k, v in os.environ.items() if k not in S3_KEYS and k != "MLFLOW_RUN_ID"}
    env["MLFLOW_TRACKING_URI"] = tracking_url
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_url)
    expected = [(c, p) for _, c, p in predict_files(uri, photos).classified]
    assert len(expected) == len(photos)
    served = served_answers(uri, photos, tmp_path, env)
    assert [a["class"] for a in served] == [c for c, _ in expected]
    assert [a["probability"] for a in served] == pytest.approx([p for _, p in expected], abs=1e-4)


def test_onnx_runtime_and_torch_answer_alike_for_every_photo_of_the_sample(
    registered, sample_images, tmp_path, monkeypatch, caplog
):
    """``models:/NAME@candidate`` through the tracking server: ``predict`` by ONNX Runtime's
    float32 graph and by torch, and the server (the float32 graph), agree on each photo's
    class, their probabilities within 1e-4."""
    _, tracking_url = registered
    uri = f"models:/{NAME}@candidate"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_url)
    photos = sorted(sample_images.glob("PetImages/*/*"))
    by_onnx = predict_files(uri, photos, "onnx").classified
    assert "holds no model.onnx" not in caplog.text  # the registry's model carries it
    by_torch = predict_files(uri, photos, "torch").classified
    assert len(by_onnx) == len(by_torch) > 1900  # the sample's broken files skipped alike
    assert [(f, c) for f, c, _ in by_onnx] == [(f, c) for f, c, _ in by_torch]
    onnx_p, torch_p = (np.array([p for *_, p in rows]) for rows in (by_onnx, by_torch))
    assert np.abs(onnx_p - torch_p).max() <= 1e-4
    env = {k: v for k, v in os.environ.items() if k not in S3_KEYS and k != "MLFLOW_RUN_ID"}
    served = served_answers(
        uri, [f for f, *_ in by_onnx], tmp_path, env, "--runtime", "onnx", per_request=64
    )
    assert [a["class"] for a in served] == [c for _, c, _ in by_torch]
    assert np.abs(np.array([a["probability"] for a in served]) - torch_p).max() <= 1e-4


def test_the_registered_int8_graph_is_predicted_and_served_by_default_where_the_cpu_allows(
    registered, photos, tmp_path, monkeypatch
):
    """``components.predict --model models:/NAME@candidate`` and the server, as typed,
    through the tracking server: on a CPU with int8 dot products both score the int8 graph
    logged with the model, alike, and near the float32 graph's answers; on one without,
    the float32 graph, and the log says why."""
    _, tracking_url = registered
    uri = f"models:/{NAME}@candidate"
    env = {k: v for k, v in os.environ.items() if k not in S3_KEYS and k != "MLFLOW_RUN_ID"}
    env["MLFLOW_TRACKING_URI"] = tracking_url
    done = subprocess.run(
        [sys.executable, "-m", "components.predict", "--model", uri, *map(str, photos)],
        env=env, capture_output=True, text=True, timeout=HANG_SECONDS,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    graph = INT8_FILE if multiplies_int8_exactly() else ONNX_FILE
    scoring = f"scoring with ONNX Runtime ({graph}, sha256 "
    assert scoring in done.stderr
    if graph == ONNX_FILE:
        assert "this CPU has no int8 dot products (VNNI)" in done.stderr
    predicted = [line.split("\t") for line in done.stdout.splitlines()]
    assert [path for path, *_ in predicted] == list(map(str, photos))
    served = served_answers(uri, photos, tmp_path, env)
    assert scoring in (tmp_path / "serve.log").read_text()
    assert [a["class"] for a in served] == [label for _, label, _ in predicted]
    predicted_dog = np.array([_dog(label, float(p)) for _, label, p in predicted])
    served_dog = np.array([_dog(a["class"], a["probability"]) for a in served])
    assert np.abs(served_dog - predicted_dog).max() <= 1e-4
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_url)
    by_float = predict_files(uri, photos, "onnx").classified
    float_dog = np.array([_dog(label, p) for _, label, p in by_float])
    assert np.abs(float_dog - predicted_dog).max() < 0.1


def _dog(label: str, probability: float) -> float:
    """The probability of a dog, from a class and that class's probability."""
    return probability if label == "dog" else 1 - probability


def test_a_model_fetched_as_kserves_storage_initializer_fetches_it_is_served_from_its_folder(
    registered, photos, tmp_path
):
    """KServe runs ``components.fetch_model`` before the server in a model server's pod
    (a ClusterStorageContainer for models:/) and points the server at the folder: the
    server then needs no tracking server at all."""
    run_id, tracking_url = registered
    env = {k: v for k, v in os.environ.items() if k not in S3_KEYS and k != "MLFLOW_RUN_ID"}
    fetched = tmp_path / "mnt/models"
    done = subprocess.run(
        [sys.executable, "-m", "components.fetch_model", f"models:/{NAME}/1", str(fetched)],
        env={**env, "MLFLOW_TRACKING_URI": tracking_url},
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (fetched / "MLmodel").is_file()
    expected = [(c, p) for _, c, p in predict_files(str(fetched), photos).classified]
    offline = {**env, "MLFLOW_TRACKING_URI": "http://127.0.0.1:9"}  # nothing answers there
    served = served_answers(str(fetched), photos, tmp_path, offline)
    assert [a["class"] for a in served] == [c for c, _ in expected]
    assert [a["probability"] for a in served] == pytest.approx([p for _, p in expected], abs=1e-4)
    with pytest.raises(SystemExit, match="expected an empty folder"):  # nothing overwritten
        fetch_model.main([f"models:/{NAME}/1", str(fetched)])


@pytest.mark.parametrize(
    "uri, said",
    [
        (f"models:/{NAME}-typo@candidate", f"no registered model '{NAME}-typo' at "),
        (f"models:/{NAME}@champion", f"registered model '{NAME}' has no alias @champion: "),
        (f"models:/{NAME}/9", f"registered model '{NAME}' has no version '9': "),
    ],
)
def test_a_model_the_registry_does_not_hold_is_one_line_naming_what_it_holds(
    registered, uri, said, monkeypatch
):
    """Said before the model server or the model loads (the step's main, in this process),
    naming the registered models and their aliases."""
    _, tracking_url = registered
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_url)
    monkeypatch.setattr(sys, "argv", sys.argv[:])  # the step empties it for KServe
    started = []
    monkeypatch.setattr("components.serving.server.serve", started.append)
    with pytest.raises(SystemExit) as refused:
        serve.main(["--model", uri, "--port", "9"])
    (line,) = str(refused.value).splitlines()
    assert line.startswith(f"error: {said}")
    assert f"{NAME} (@candidate → version 1)" in line
    assert started == []  # the server never started


def test_a_graph_swapped_in_the_artifact_store_is_refused_by_predict_and_fetch(
    registered, photos, tmp_path, monkeypatch
):
    """Someone who can write the artifact store (here through the tracking server, as
    ``mlflow`` itself uploads) replaces the registered model's model.onnx with its int8
    graph: the files no longer match the digests the tracking store recorded at train
    time, so predict ends in one line naming the file, and KServe's storage initializer
    fetches nothing; put back, the model answers again."""
    _, tracking_url = registered
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_url)
    client = MlflowClient(tracking_url)
    model_id = logged_models.model_id_of(f"models:/{NAME}@candidate")
    stored = client.get_logged_model(model_id).artifact_location
    kept, int8_graph = (
        Path(mlflow.artifacts.download_artifacts(f"{stored}/{name}", dst_path=str(tmp_path / name)))
        for name in ("model.onnx", "model.int8.onnx")
    )
    swapped = tmp_path / "swapped/model.onnx"
    swapped.parent.mkdir()
    shutil.copyfile(int8_graph, swapped)
    env = {k: v for k, v in os.environ.items() if k not in S3_KEYS and k != "MLFLOW_RUN_ID"}
    env["MLFLOW_TRACKING_URI"] = tracking_url
    client.log_model_artifact(model_id, str(swapped))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "components.predict", "--model", f"models:/{NAME}@candidate",
             str(photos[0])],
            env=env, capture_output=True, text=True, timeout=HANG_SECONDS,
        )  # fmt: skip
        assert done.returncode == 1 and done.stdout == ""
        (line,) = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        assert "model.onnx: its sha256 is" in line and f"MLflow model {model_id}" in line
        with pytest.raises(SystemExit, match="model.onnx: its sha256 is"):
            fetch_model.main([f"models:/{NAME}/1", str(tmp_path / "mnt/models")])
        assert list((tmp_path / "mnt/models").iterdir()) == []
    finally:
        client.log_model_artifact(model_id, str(kept))
    assert predict_files(f"models:/{NAME}@candidate", photos[:1]).classified


def test_a_large_file_planted_in_a_registered_model_is_refused_before_it_is_downloaded(
    registered, photos, tmp_path, monkeypatch
):
    """8 MiB no digest names, beside the registered files: refused by the sizes the
    artifact store lists, before any file is fetched."""
    _, tracking_url = registered
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_url)
    client = MlflowClient(tracking_url)
    model_id = logged_models.model_id_of(f"models:/{NAME}@candidate")
    planted = tmp_path / "planted/extra.bin"
    planted.parent.mkdir()
    planted.write_bytes(os.urandom(8 * 2**20))
    client.log_model_artifact(model_id, str(planted))
    try:
        with pytest.raises(SystemExit, match="'extra.bin' of 8 MiB; nothing was downloaded"):
            fetch_model.main([f"models:/{NAME}/1", str(tmp_path / "mnt/models")])
        assert list((tmp_path / "mnt/models").iterdir()) == []
        with pytest.raises(Exception, match="nothing was downloaded"):
            predict_files(f"models:/{NAME}@candidate", photos[:1])
    finally:
        location = client.get_logged_model(model_id).artifact_location
        from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

        get_artifact_repository(location).delete_artifacts("extra.bin")
    assert predict_files(f"models:/{NAME}@candidate", photos[:1]).classified
