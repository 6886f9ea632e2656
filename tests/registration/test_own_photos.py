"""A team's own photos through the steps: five flower classes preprocessed, trained,
evaluated, registered, then named by class by predict and the model server; and a
registered name that keeps one class list."""

from __future__ import annotations

import asyncio
import base64
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kserve.protocol.infer_type import InferInput, InferRequest
from mlflow import MlflowClient

from components.evaluation.config import EvaluateConfig
from components.evaluation.predictions import predict_files
from components.evaluation.report import evaluate
from components.registration.config import RegisterConfig
from components.registration.decision import register_if_accurate
from components.serving.config import ServeConfig
from components.serving.model import DogsVsCats
from components.training import session
from components.training.config import TrainConfig
from tests.support.processes import HANG_SECONDS

FLOWERS = ["daisy", "dandelion", "roses", "sunflowers", "tulips"]


def trained_and_evaluated(arrays, folder) -> str:
    """The run id of a one-batch model of ``arrays``, evaluated on its test split."""
    result = session.train(TrainConfig(data=str(arrays), output=str(folder), dry_run=True))
    report = evaluate(
        EvaluateConfig(model_dir=str(folder), data=str(arrays), output=str(folder) + "-eval")
    )
    assert report["classes"] == json.loads((arrays / "meta.json").read_text())["classes"]
    return result.run_id


@pytest.mark.slow
def test_five_classes_are_registered_and_answered_by_name(
    flowers_arrays, flowers_photos, tmp_path, mlflow_store
):
    meta = json.loads((flowers_arrays / "meta.json").read_text())
    assert meta["classes"] == FLOWERS and meta["ignored"] == ["flower_photos/LICENSE.txt"]
    # each class's test share: its photos below a tenth, or its lowest where none is
    assert meta["counts"]["test"] == {**dict.fromkeys(FLOWERS, 1), "roses": 2}
    run_id = trained_and_evaluated(flowers_arrays, tmp_path / "model")
    run = MlflowClient(mlflow_store).get_run(run_id)
    assert json.loads(run.data.params["data_classes"]) == FLOWERS
    assert run.data.params["data_train_tulips"] == "10"
    assert {f"test_{name}_f1" for name in FLOWERS} | {"test_macro_f1"} <= set(run.data.metrics)
    decision = register_if_accurate(
        RegisterConfig(mlflow_run_id=run_id, min_accuracy=0.0, registered_model_name="flowers")
    )
    assert decision.took_alias
    version = MlflowClient(mlflow_store).get_model_version("flowers", decision.version)
    assert json.loads(version.tags["classes"]) == FLOWERS
    assert "Classifier of 5 classes" in version.description

    album = flowers_photos[0].parent  # as the README types it: a folder, the registry's URI
    typed = subprocess.run(
        [sys.executable, "-m", "components.predict", "--model", "models:/flowers@candidate"]
        + [str(album)],
        capture_output=True,
        text=True,
        timeout=HANG_SECONDS,
    )
    assert typed.returncode == 0, typed.stderr[-2000:]
    lines = [line.split("\t") for line in typed.stdout.splitlines()]
    assert [Path(file).parent for file, _, _ in lines] == [album] * len(list(album.glob("*.jpg")))
    assert {label for _, label, _ in lines} <= set(FLOWERS)
    answers = predict_files("models:/flowers@candidate", flowers_photos).classified
    assert len(answers) == len(flowers_photos) and {a[1] for a in answers} <= set(FLOWERS)
    served = DogsVsCats(ServeConfig(model="models:/flowers@candidate"))
    assert served.load()
    photos = [base64.b64encode(path.read_bytes()).decode() for path in flowers_photos]
    v1 = {"instances": [{"image": {"b64": photo}} for photo in photos]}
    v2 = InferRequest("flowers", [InferInput("image", [len(photos)], "BYTES", photos)])

    async def both():  # one event loop, as in the server
        return await asyncio.gather(served.predict(v1), served.predict(v2))

    v1_answer, v2_answer = asyncio.run(both())
    expected = [label for _, label, _ in answers]
    assert [answer["class"] for answer in v1_answer["predictions"]] == expected
    assert {o.name: o.data for o in v2_answer.outputs}["class"] == expected


@pytest.mark.slow
def test_a_model_of_other_classes_is_refused_under_a_name_even_with_force_alias(
    flowers_arrays, small_arrays, tmp_path, mlflow_store
):
    pets = trained_and_evaluated(small_arrays, tmp_path / "pets")
    first = register_if_accurate(
        RegisterConfig(mlflow_run_id=pets, min_accuracy=0.0, registered_model_name="pets")
    )
    flowers = trained_and_evaluated(flowers_arrays, tmp_path / "flowers")
    with pytest.raises(ValueError) as refused:
        register_if_accurate(
            RegisterConfig(
                mlflow_run_id=flowers,
                min_accuracy=0.0,
                registered_model_name="pets",
                force_alias=True,
            )
        )
    assert str(refused.value) == (
        f"refusing to register MLflow run {flowers}'s model of the classes daisy, dandelion, "
        "roses, sunflowers, tulips under registered_model_name=pets: its versions are of the "
        "classes cat, dog; give these photos' model another registered_model_name"
    )
    with pytest.raises(ValueError, match="the model answers the classes daisy, dandelion, "):
        evaluate(
            EvaluateConfig(
                model_dir=str(tmp_path / "flowers"),
                data=str(small_arrays),
                output=str(tmp_path / "crossed"),
                split="val",  # the test split: refused sooner, as not the one it trained beside
            )
        )
    client = MlflowClient(mlflow_store)
    assert [str(v.version) for v in client.search_model_versions("name = 'pets'")] == ["1"]
    assert str(client.get_model_version_by_alias("pets", "candidate").version) == first.version
