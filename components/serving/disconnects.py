"""A request whose client has gone stops: its photos still waiting to be decoded are not.

A client that leaves while its body is still coming ends its request with one log line,
not the tracebacks Starlette's body reader and uvicorn would write for it.

Once a request's body is in, nothing else but its end can come from the client: the
middleware then listens for the disconnect that uvicorn reports when the connection
closes, and cancels the request's handling. The model's decodes waiting for a slot and
its rows waiting for a forward pass are dropped with it (the batcher skips cancelled
requests); a decode already running finishes, and no other starts.
"""

from __future__ import annotations

import asyncio
import logging

from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp

from components.serving.limits import Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class StopWhenClientLeaves:
    """ASGI middleware: cancel a request's handling when its client disconnects."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        handling = asyncio.current_task()
        assert handling is not None
        answered, left = False, False
        watching: asyncio.Task[None] | None = None

        async def watch() -> None:
            """Cancel ``handling`` if the client leaves before its answer is sent. uvicorn
            reports a disconnect also once the answer is complete: that one is not the
            client leaving."""
            nonlocal left
            message = await receive()  # only the end can come now
            if message["type"] == "http.disconnect" and not answered:
                left = True
                handling.cancel()

        async def reading() -> Message:
            nonlocal watching
            message = await receive()
            body_in = message["type"] != "http.request" or not message.get("more_body")
            if body_in and watching is None:
                watching = asyncio.ensure_future(watch())
            return message

        async def answering(message: Message) -> None:
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered = True

        try:
            await self.app(scope, reading, answering)
        except ClientDisconnect:  # gone while its body was still coming: nothing to answer
            log.info("client gone mid-body: %s %s", scope.get("method"), scope.get("path"))
        except asyncio.CancelledError:
            if not left:
                raise  # cancelled from outside: the server is stopping
            handling.uncancel()
            log.info("client gone: stopped %s %s", scope.get("method"), scope.get("path"))
        finally:
            if watching is not None:
                watching.cancel()
