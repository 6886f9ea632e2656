"""V1 predict answered ahead of FastAPI by KServe's handler; every other request passed on.

In process, with a stand-in for KServe's V1 handler (what it answers is tested against a
real server process in test_server.py) and KServe's own exception handler.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from kserve.errors import InvalidInput, invalid_input_handler
from starlette.responses import JSONResponse

from components.serving.direct import DirectPredict, predicted_model


class Endpoints:
    """KServe's V1 handler's stand-in: records the model asked for, reads the body."""

    def __init__(self):
        self.asked: list[str] = []

    async def predict(self, model_name, request):
        self.asked.append(model_name)
        body = await request.body()
        if body == b"bad":
            raise InvalidInput("expected a photo, found bad")
        if body == b"broken":
            raise LookupError("up")
        return JSONResponse({"model": model_name, "bytes": len(body)})


async def passed_on(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 299, "headers": []})
    await send({"type": "http.response.body", "body": b"fastapi"})


def ask(method: str, path: str, body: bytes = b"{}") -> tuple[int, bytes, list[str]]:
    sent: list[dict] = []

    async def send(message) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": body}

    endpoints = Endpoints()
    direct = DirectPredict(passed_on, endpoints, {InvalidInput: invalid_input_handler})
    scope = {"type": "http", "method": method, "path": path, "headers": [], "query_string": b""}
    asyncio.run(direct(scope, receive, send))
    return sent[0]["status"], sent[1]["body"], endpoints.asked


def test_v1_predict_is_answered_by_the_handler_with_the_model_named():
    status, body, asked = ask("POST", "/v1/models/dogs-vs-cats:predict", b"12345")
    assert status == 200 and json.loads(body) == {"model": "dogs-vs-cats", "bytes": 5}
    assert asked == ["dogs-vs-cats"]


def test_the_handlers_errors_get_kserves_error_answer():
    status, body, _ = ask("POST", "/v1/models/dogs-vs-cats:predict", b"bad")
    assert status == 400 and json.loads(body) == {"error": "expected a photo, found bad"}


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", "/v1/models/dogs-vs-cats:predict"),
        ("POST", "/v1/models/dogs-vs-cats:explain"),
        ("POST", "/v1/models/a/b:predict"),
        ("POST", "/v1/models/:predict"),
        ("POST", "/v2/models/dogs-vs-cats/infer"),
        ("GET", "/"),
    ],
)
def test_every_other_request_goes_on_to_fastapi(method, path):
    status, body, asked = ask(method, path)
    assert (status, body, asked) == (299, b"fastapi", [])


def test_the_model_is_named_as_kserves_route_matches_it():
    def scope(path: str) -> dict:
        return {"type": "http", "method": "POST", "path": path}

    assert predicted_model(scope("/v1/models/a:predict:predict")) == "a:predict"
    assert predicted_model({"type": "websocket", "path": "/v1/models/a:predict"}) is None


def test_errors_no_handler_takes_go_up_to_the_layers_around():
    async def receive() -> dict:
        return {"type": "http.request", "body": b"broken"}

    direct = DirectPredict(passed_on, Endpoints(), {Exception: invalid_input_handler})
    scope = {"type": "http", "method": "POST", "path": "/v1/models/m:predict", "headers": []}
    with pytest.raises(LookupError, match="up"):
        asyncio.run(direct(scope, receive, None))
