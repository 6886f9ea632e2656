"""The V1 and v2 request bodies read into photo bytes, and every malformed one refused."""

from __future__ import annotations

import base64

import pytest
from kserve.errors import InvalidInput
from kserve.protocol.infer_type import InferInput, InferRequest

from components.serving import payloads

PHOTO = b"\xff\xd8\xff photo bytes"
B64 = base64.b64encode(PHOTO).decode()


def v1(*instances) -> dict:
    return {"instances": list(instances)}


def v2(data, datatype="BYTES", shape=None, name="image") -> InferRequest:
    shape = [len(data)] if shape is None else shape
    return InferRequest(
        model_name="dogs-vs-cats",
        infer_inputs=[InferInput(name=name, shape=shape, datatype=datatype, data=data)],
    )


def test_v1_photos_come_in_order_also_from_a_body_sent_without_its_content_type():
    body = v1({"image": {"b64": B64}}, {"image": {"b64": base64.b64encode(b"2").decode()}})
    assert payloads.v1_images(body, 8) == [PHOTO, b"2"]
    assert payloads.v1_images(b'{"instances": [{"image": {"b64": "Mg=="}}]}', 8) == [b"2"]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"instances": ', "expected a JSON object like"),
        ([1, 2], "found a list of 2"),
        ({"inputs": []}, "found an object with keys \\['inputs'\\]"),
        (v1(), "expected 1 to 8 photos in one request, found 0"),
        (v1(*[{"image": {"b64": B64}}] * 9), "expected 1 to 8 photos in one request, found 9"),
        (v1({"image": B64}), 'instance 0: expected {"image": {"b64": "<base64>"}}'),
        (v1({"image": {"b64": B64}}, {"image": {"b64": 7}}), "instance 1: expected"),
        (v1({"image": {"b64": "not base64!"}}), "instance 0: not base64"),
    ],
    ids=["not json", "a list", "v2 keys", "none", "too many", "no b64", "b64 not text", "bad b64"],
)
def test_v1_bodies_that_are_not_the_form_are_400s_that_say_so(body, message):
    with pytest.raises(InvalidInput, match=message):
        payloads.v1_images(body, 8)


def test_v2_photos_come_in_order():
    assert payloads.v2_images(v2([B64, "Mg=="]), 8) == [PHOTO, b"2"]


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        (v2([B64], name="input-0"), "expected one input named 'image', found \\['input-0'\\]"),
        (v2([1.0], datatype="FP32"), "expected input 'image' of datatype BYTES"),
        (v2([B64], shape=[1, 1]), "and shape \\[N\\], found BYTES of shape \\[1, 1\\]"),
        (v2([B64], shape=[3]), "expected 3 elements in 'image', found 1"),
        (v2([B64] * 9), "expected 1 to 8 photos in one request, found 9"),
        (v2(["%%%"]), "instance 0: not base64"),
    ],
    ids=["name", "datatype", "shape", "count", "too many", "bad b64"],
)
def test_v2_requests_that_are_not_the_form_are_400s_that_say_so(request_, message):
    with pytest.raises(InvalidInput, match=message):
        payloads.v2_images(request_, 8)


def test_a_photo_over_the_file_limit_is_refused_before_it_is_decoded(monkeypatch):
    monkeypatch.setattr(payloads, "MAX_FILE_BYTES", 10)
    with pytest.raises(InvalidInput, match="instance 0: over the 10-byte limit"):
        payloads.v1_images(v1({"image": {"b64": base64.b64encode(b"x" * 30).decode()}}), 8)


def test_answers_pair_each_class_with_its_probability():
    assert payloads.v1_answer(["dog", "cat"], [0.9, 0.6]) == {
        "predictions": [{"class": "dog", "probability": 0.9}, {"class": "cat", "probability": 0.6}]
    }
    answer = payloads.v2_answer("dogs-vs-cats", v2([B64, B64]), ["dog", "cat"], [0.9, 0.6])
    outputs = {o.name: (o.datatype, o.shape, o.data) for o in answer.outputs}
    assert outputs == {
        "class": ("BYTES", [2], ["dog", "cat"]),
        "probability": ("FP32", [2], [0.9, 0.6]),
    }
