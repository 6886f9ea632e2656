"""The route guard ahead of KServe's routes: no model repository, a truthful liveness."""

from __future__ import annotations

import asyncio
import json

import pytest

from components.serving.routes import RouteGuard


async def passed_on(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 299, "headers": []})
    await send({"type": "http.response.body", "body": b"kserve"})


def ask(path: str, serving: bool, method: str = "GET", headers=()) -> tuple[int, bytes]:
    sent: list[dict] = []

    async def send(message) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    guard = RouteGuard(passed_on, serving=lambda: serving)
    scope = {"type": "http", "path": path, "method": method, "headers": list(headers)}
    asyncio.run(guard(scope, receive, send))
    return sent[0]["status"], sent[1]["body"]


@pytest.mark.parametrize("action", ["load", "unload"])
def test_the_model_repository_is_not_reachable(action):
    status, body = ask(f"/v2/repository/models/dogs-vs-cats/{action}", True, "POST")
    assert status == 404 and "not served" in json.loads(body)["error"]


def test_liveness_follows_whether_the_model_serves():
    assert ask("/", True) == (200, b'{"status": "alive"}')
    assert ask("/", False)[0] == 503


def test_every_other_route_is_kserves():
    assert ask("/v1/models/dogs-vs-cats:predict", True, "POST") == (299, b"kserve")
    assert ask("/v2/health/ready", False) == (299, b"kserve")


def test_the_v2_binary_data_extension_is_refused_in_a_4xx_that_says_so():
    binary = [(b"inference-header-content-length", b"120")]
    status, body = ask("/v2/models/dogs-vs-cats/infer", True, "POST", binary)
    assert status == 415 and "send the request as JSON" in json.loads(body)["error"]
