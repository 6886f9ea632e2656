"""The body limit: a declared or streamed body over it is a 413, read no further."""

from __future__ import annotations

import asyncio
import json

from components.serving.limits import BodyLimit

CHUNK = b"x" * 1000


async def echo_length(scope, receive, send):
    """An application that reads the whole body, as KServe's endpoints do."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": str(len(body)).encode()})


def call(headers: dict, chunks: int, max_bytes: int) -> tuple[int, dict, int]:
    """Status, JSON or text body, and how many chunks the client was asked for."""
    asked, sent = 0, []

    async def receive():
        nonlocal asked
        asked += 1
        return {"type": "http.request", "body": CHUNK, "more_body": asked < chunks}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "headers": [(k.encode(), v.encode()) for k, v in headers.items()]}
    asyncio.run(BodyLimit(echo_length, max_bytes)(scope, receive, send))
    status = sent[0]["status"]
    body = sent[1]["body"]
    return status, (json.loads(body) if status == 413 else body.decode()), asked


def test_a_body_within_the_limit_reaches_the_application_whole():
    assert call({"content-length": "5000"}, chunks=5, max_bytes=5000) == (200, "5000", 5)


def test_a_declared_length_over_the_limit_is_refused_before_any_byte_is_read():
    status, body, asked = call({"content-length": str(200 * 1024**2)}, chunks=10**6, max_bytes=5000)
    assert (status, asked) == (413, 0)
    assert (
        body["error"]
        == f"expected a request body of at most 5000 bytes, found {200 * 1024**2} bytes declared"
    )


def test_a_streamed_body_is_refused_once_it_passes_the_limit_the_rest_unread():
    status, body, asked = call({"transfer-encoding": "chunked"}, chunks=200_000, max_bytes=5000)
    assert (status, asked) == (413, 6)  # 200 MB offered; 6 kB read
    assert "over 5000 bytes streamed" in body["error"]


def test_a_length_that_is_not_a_number_is_refused():
    assert call({"content-length": "-1"}, chunks=1, max_bytes=5000)[0] == 413
