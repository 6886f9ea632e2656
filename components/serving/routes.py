"""What a client of the predictor may reach, ahead of KServe's routes: not the model
repository (its load and unload would let any client take the model away), and a
liveness route that says whether the model serves, so that Kubernetes restarts a pod
whose model is gone."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp

from components.serving.limits import Receive, Scope, Send

REPOSITORY = "/v2/repository/"
# the v2 binary data extension: KServe decodes its BYTES as UTF-8 text, which a photo is not
BINARY_HEADER = b"inference-header-content-length"


class RouteGuard:
    """ASGI middleware: 404 for the model repository's routes, 415 for the v2 binary data
    extension; ``GET /`` answers 200 while ``serving()`` is true, 503 else."""

    def __init__(self, app: ASGIApp, serving: Callable[[], bool]):
        self.app, self.serving = app, serving

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path.startswith(REPOSITORY):
            await _answer(send, 404, {"error": "the model repository is not served here"})
        elif path.startswith("/v2/") and BINARY_HEADER in dict(scope.get("headers") or []):
            said = (
                "the v2 binary data extension is not served: send the request as JSON "
                '(Content-Type: application/json), each photo base64 in "data"'
            )
            await _answer(send, 415, {"error": said})
        elif path == "/" and scope.get("method") in ("GET", "HEAD"):
            alive = self.serving()
            await _answer(send, 200 if alive else 503, {"status": "alive" if alive else "down"})
        else:
            await self.app(scope, receive, send)


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data})
