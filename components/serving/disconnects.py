"""A request whose client has gone stops: its photos still waiting to be decoded are not.

Once a request's body is in, nothing else but its end can come from the client: the
middleware then listens for the disconnect that uvicorn reports when the connection
closes, and cancels the request's handling. The model's decodes waiting for a slot and
its rows waiting for a forward pass are dropped with it (the batcher skips cancelled
requests); a decode already running finishes, and no other starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from components.serving.limits import Message, Receive, Scope, Send

log = logging.getLogger(__name__)


class StopWhenClientLeaves:
    """ASGI middleware: cancel a request's handling when its client disconnects."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body_in, answered = asyncio.Event(), asyncio.Event()

        async def reading() -> Message:
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body"):
                body_in.set()
            return message

        async def answering(message: Message) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered.set()

        handling = asyncio.ensure_future(self.app(scope, reading, answering))
        watching = asyncio.ensure_future(self._watch(receive, body_in, answered, handling))
        try:
            await handling
        except asyncio.CancelledError:
            if not watching.done() or not watching.result():
                raise  # cancelled from outside: the server is stopping
            log.info("client gone: stopped %s %s", scope.get("method"), scope.get("path"))
        finally:
            watching.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watching

    @staticmethod
    async def _watch(
        receive: Receive, body_in: asyncio.Event, answered: asyncio.Event, handling: asyncio.Future
    ) -> bool:
        """Whether the client left before its answer was sent (then ``handling`` is
        cancelled). uvicorn reports a disconnect also once the answer is complete: that
        one is not the client leaving."""
        await body_in.wait()
        message = await receive()  # only the end can come now
        if message["type"] == "http.disconnect" and not answered.is_set() and not handling.done():
            handling.cancel()
            return True
        return False
