"""The V1 predict route answered by KServe's own handler straight from the ASGI stack.

Under load the event loop holds the GIL that the decode and forward threads also need,
and FastAPI's way to a handler (its router, route matching, dependency solving and the
middleware layers between) took about a third of the loop's GIL-holding time at 32
clients (py-spy, docs/BENCHMARKS.md). The predict route, the one a client calls for
every photo, skips that way: the same handler and exception handlers answer it, with
the same bodies, statuses and KServe metrics; every other route is FastAPI's as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kserve.protocol.rest.v1_endpoints import V1Endpoints
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp

from components.serving.limits import Receive, Scope, Send

PREFIX, SUFFIX = "/v1/models/", ":predict"
ANY_ERROR = (Exception, 500)  # Starlette hands these to ServerErrorMiddleware


class DirectPredict:
    """ASGI middleware: ``POST /v1/models/NAME:predict`` answered by ``endpoints``'
    predict handler, its exceptions by ``handlers`` (KServe's, by exception class);
    every other request passed on to ``app``.

    ``handlers`` is read when the middleware is built, which Starlette does at the first
    request, after KServe has added its handlers to the mapping given here. As in
    Starlette's own stack, the one for any ``Exception`` is left to the outermost layer:
    what no other handler takes goes up through the middlewares around this one (the body
    limit's own signal among them).
    """

    def __init__(self, app: ASGIApp, endpoints: V1Endpoints, handlers: Mapping[Any, Any]):
        self.app, self.endpoints = app, endpoints
        specific = {kind: handler for kind, handler in handlers.items() if kind not in ANY_ERROR}
        self.answer = ExceptionMiddleware(self._predict, handlers=specific)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        model = predicted_model(scope)
        if model is None:
            await self.app(scope, receive, send)
            return
        scope["path_params"] = {"model_name": model}
        await self.answer(scope, receive, send)

    async def _predict(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response = await self.endpoints.predict(scope["path_params"]["model_name"], request)
        await response(scope, receive, send)


def predicted_model(scope: Scope) -> str | None:
    """The model that an HTTP request for V1 predict names, as KServe's route
    ``/v1/models/{model_name}:predict`` matches it (POST only); ``None`` for any other."""
    if scope["type"] != "http" or scope.get("method") != "POST":
        return None
    path: str = scope.get("path", "")
    if not (path.startswith(PREFIX) and path.endswith(SUFFIX)):
        return None
    model = path[len(PREFIX) : -len(SUFFIX)]
    return model if model and "/" not in model else None
