"""The KServe model in this process: every answer is components.predict's for the same file."""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from kserve.errors import InvalidInput
from kserve.protocol.infer_type import InferInput, InferRequest

from components.evaluation.predictions import predict_files
from components.scoring.scorers import NonFiniteLogitsError
from components.serving.config import ServeConfig
from components.serving.model import DogsVsCats
from tests.support.helpers import png_of_zeros
from tests.support.models import nan_model, seeded_model


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return seeded_model(tmp_path_factory.mktemp("serve") / "model")


@pytest.fixture(scope="module")
def photos(sample_images) -> list:
    """Cats and dogs of the sample, JPEGs of many sizes."""
    return [
        *sorted((sample_images / "PetImages/Cat").glob("*.jpg"))[:6],
        *sorted((sample_images / "PetImages/Dog").glob("*.jpg"))[:6],
    ]


def served(model_dir, **settings) -> DogsVsCats:
    model = DogsVsCats(ServeConfig(model=str(model_dir), **settings))
    assert model.load() and model.ready
    return model


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def test_v1_and_v2_answer_as_predict_does_for_the_same_files(model_dir, photos):
    expected = [(label, p) for _, label, p in predict_files(str(model_dir), photos).classified]
    assert {label for label, _ in expected} == {"cat", "dog"}  # the seeded net says both
    model = served(model_dir)
    v1 = {"instances": [{"image": {"b64": b64(p.read_bytes())}} for p in photos]}
    v2 = InferRequest(
        model_name="dogs-vs-cats",
        infer_inputs=[
            InferInput("image", [len(photos)], "BYTES", [b64(p.read_bytes()) for p in photos])
        ],
    )

    async def both():  # one event loop, as in the server
        return await asyncio.gather(model.predict(v1), model.predict(v2))

    v1_answer, v2_answer = asyncio.run(both())
    answers = v1_answer["predictions"]
    outputs = {o.name: o.data for o in v2_answer.outputs}
    for got in (
        [(a["class"], a["probability"]) for a in answers],
        list(zip(outputs["class"], outputs["probability"], strict=True)),
    ):
        assert [label for label, _ in got] == [label for label, _ in expected]
        assert all(abs(p - q) < 1e-3 for (_, p), (_, q) in zip(got, expected, strict=True))


@pytest.mark.parametrize(
    ("photo", "message"),
    [
        (b"hello, not a photo", "instance 1: not an image in a photo format"),
        (b"", "instance 1: not an image"),
        ("truncated", "instance 1: truncated or corrupt image data"),
        (png_of_zeros(8000, 8000), "instance 1: 8000×8000 pixels, over the 50,000,000-pixel limit"),
    ],
    ids=["text", "empty", "truncated", "pixel bomb"],
)
def test_a_photo_that_does_not_decode_is_a_400_naming_it(model_dir, photos, photo, message):
    if photo == "truncated":
        photo = photos[0].read_bytes()[:2000]
    body = {
        "instances": [
            {"image": {"b64": b64(photos[0].read_bytes())}},
            {"image": {"b64": b64(photo)}},
        ]
    }
    with pytest.raises(InvalidInput, match=message):
        asyncio.run(served(model_dir).predict(body))


def test_non_finite_logits_are_an_error_not_a_class(tmp_path, photos):
    """A model that gives NaN logits: no "cat" with a null probability, an error (KServe
    answers it with a 500 and the message)."""
    model = served(nan_model(tmp_path / "nan"))
    body = {"instances": [{"image": {"b64": b64(photos[0].read_bytes())}}]}
    with pytest.raises(
        NonFiniteLogitsError,
        match=r"expected finite logits from the model, found \[nan, nan\] for photo 0",
    ):
        asyncio.run(model.predict(body))


def test_a_scoring_call_held_past_its_bound_makes_the_model_not_ready_until_it_ends(
    model_dir, monkeypatch
):
    """A call that ONNX Runtime's own bound did not stop (held in one long node): the
    readiness probe then reads not ready, so no more requests come; ready again after."""
    from components.serving import model as served_model

    monkeypatch.setattr(served_model, "STUCK_SECONDS", 0.2)
    model = served(model_dir)
    release, seen = threading.Event(), []
    scorer = model.scorer

    def held(pixels):
        release.wait(timeout=30)
        return scorer(pixels)

    model.scorer = held
    pixels = np.zeros((1, 1, 40, 40), np.float32)
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(model._probabilities, pixels)
        time.sleep(0.6)
        seen.append(model.ready)
        release.set()
        call.result(timeout=30)
    assert seen == [False] and model.ready
