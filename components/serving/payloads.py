"""The two request formats KServe speaks, read into photo bytes, and the answers to them.

V1: ``{"instances": [{"image": {"b64": "..."}}, ...]}`` → ``{"predictions": [{"class":
"dog", "probability": 0.97}, ...]}``. Open Inference Protocol (v2): one ``BYTES`` input
``image`` of shape ``[N]``, each element the base64 of a file → outputs ``class``
(``BYTES``) and ``probability`` (``FP32``).
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from kserve.errors import InvalidInput
from kserve.protocol.infer_type import InferOutput, InferRequest, InferResponse

from components.data.images import MAX_FILE_BYTES

V1_EXAMPLE = '{"instances": [{"image": {"b64": "<base64 of the file>"}}]}'


def v1_images(payload: Any, max_instances: int) -> list[bytes]:
    """The photos of a V1 request, in order.

    Raises:
        InvalidInput: (400) the body is not of the form above, holds no photo or more than
            ``max_instances``, or an element is not base64.
    """
    if isinstance(payload, bytes | str):  # a body sent without Content-Type: application/json
        try:
            payload = json.loads(payload)
        except ValueError as err:
            raise InvalidInput(f"expected a JSON object like {V1_EXAMPLE}: {err}") from None
    instances = payload.get("instances") if isinstance(payload, dict) else None
    if not isinstance(instances, list):
        raise InvalidInput(f"expected a JSON object like {V1_EXAMPLE}, found {_kind(payload)}")
    _check_count(len(instances), max_instances)
    encoded = []
    for index, instance in enumerate(instances):
        image = instance.get("image") if isinstance(instance, dict) else None
        text = image.get("b64") if isinstance(image, dict) else None
        if not isinstance(text, str):
            raise InvalidInput(
                f'instance {index}: expected {{"image": {{"b64": "<base64>"}}}}, '
                f"found {_kind(instance)}"
            )
        encoded.append(text)
    return [_from_base64(text, index) for index, text in enumerate(encoded)]


def v2_images(request: InferRequest, max_instances: int) -> list[bytes]:
    """The photos of a v2 request: its one BYTES input ``image``, in order.

    Raises:
        InvalidInput: (400) another input, datatype or shape, too many photos, not base64.
    """
    names = [each.name for each in request.inputs]
    if names != ["image"]:
        raise InvalidInput(f"expected one input named 'image', found {_kind(names)}")
    (image,) = request.inputs
    if image.datatype != "BYTES" or len(image.shape) != 1:
        raise InvalidInput(
            f"expected input 'image' of datatype BYTES and shape [N], found "
            f"{_short(str(image.datatype))} of shape {_short(str(image.shape))}"
        )
    elements = list(image.data or [])
    # [-1] as the model's metadata declares it: as many as there are
    if image.shape[0] != -1 and len(elements) != image.shape[0]:
        found = len(elements)
        raise InvalidInput(f"expected {image.shape[0]} elements in 'image', found {found}")
    _check_count(len(elements), max_instances)
    return [_from_base64(element, index) for index, element in enumerate(elements)]


def v1_answer(classes: list[str], probabilities: list[float]) -> dict[str, Any]:
    return {
        "predictions": [
            {"class": name, "probability": probability}
            for name, probability in zip(classes, probabilities, strict=True)
        ]
    }


def v2_answer(
    model: str, request: InferRequest, classes: list[str], probabilities: list[float]
) -> InferResponse:
    count = [len(classes)]
    return InferResponse(
        response_id=request.id or "",
        model_name=model,
        infer_outputs=[
            InferOutput(name="class", shape=count, datatype="BYTES", data=classes),
            InferOutput(name="probability", shape=count, datatype="FP32", data=probabilities),
        ],
    )


def _check_count(count: int, max_instances: int) -> None:
    if not 1 <= count <= max_instances:
        raise InvalidInput(f"expected 1 to {max_instances} photos in one request, found {count}")


def _from_base64(element: Any, index: int) -> bytes:
    if isinstance(element, bytes):
        element = element.decode("ascii", errors="replace")
    if not isinstance(element, str):
        raise InvalidInput(f"instance {index}: expected base64 text, found {_kind(element)}")
    if len(element) > (MAX_FILE_BYTES * 4) // 3 + 4:
        raise InvalidInput(f"instance {index}: over the {MAX_FILE_BYTES}-byte limit for a photo")
    try:
        return base64.b64decode(element, validate=True)
    except (binascii.Error, ValueError) as err:
        raise InvalidInput(f"instance {index}: not base64 ({err})") from None


def _kind(value: Any) -> str:
    """What a client sent, in a few words, without echoing it back: at most five names
    of at most 40 characters each, else the kind of thing."""
    if isinstance(value, dict):
        return f"an object with keys {_names(list(value))}"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return _names(value)
    if isinstance(value, list):
        return f"a list of {len(value)}"
    return type(value).__name__


def _names(names: list[Any]) -> str:
    shown = [repr(_short(str(name))) for name in names[:5]]
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return f"[{', '.join(shown)}]{more}"


def _short(text: str, most: int = 40) -> str:
    return text if len(text) <= most else text[:most] + "…"
