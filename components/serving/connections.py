"""Each client connection held to time and size limits, so a slow or greedy client loses
its own slot, never everyone else's: a slot is held only by a complete request.

uvicorn (under KServe's server) reads requests with httptools and bounds neither the
time a request's head or body may take nor its headers' size: a connection that sends
nothing, or trickles a byte every few seconds, keeps its slot of ``--max-connections``
for ever, and headers grow the process as they come. This protocol, uvicorn's own with
deadlines and counts added, answers 408 to a head or body not complete in time, and 431
to a head over its size or header count, then closes the connection. Every request in
flight holds its body, its parsed JSON, its photos' bytes and their pixels (several times
its body: benchmarks/serve_memory.py), so the bodies of the requests served at once are
bounded together too, counted as their bytes arrive (a body stalled part-way, chunked or
not, holds what it sent): one that would take them over ``max_inflight_bytes`` is
answered 503 with ``Retry-After`` at once, whatever each alone may hold.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

RETRY_AFTER_SECONDS = 1  # what a 503 asks a client to wait: a request is served in seconds
REASONS = {
    408: b"Request Timeout",
    431: b"Request Header Fields Too Large",
    503: b"Service Unavailable",
}


@dataclass(frozen=True)
class ConnectionLimits:
    """How long a request's head and body may take, how large its head may be, how many
    connections are served at once and how many body bytes they hold together (a request
    past either is answered 503)."""

    max_connections: int = 32
    max_inflight_bytes: int = 48 * 2**20
    header_seconds: float = 10.0
    body_seconds: float = 30.0
    max_header_bytes: int = 64 * 1024
    max_headers: int = 100


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with ``limits`` on each request's head and body."""

    limits = ConnectionLimits()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_bytes, self._header_count, self._refusal = 0, 0, 0
        self._in_head, self._app_started, self._busy = True, False, False
        self._body_bytes = 0  # this request's body so far; held while it is served
        self._draining = False  # answered 503 mid-body: its rest is read and dropped
        self._deadline: asyncio.TimerHandle | None = None
        self._arm(self.limits.header_seconds)  # nothing sent yet counts too

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self._in_head and not self._refusal:
            self._head_bytes += len(data)  # all of it was head: the head is not complete
            if self._head_bytes > self.limits.max_header_bytes:
                self._refusal = 431
        if self._refusal and not self._draining and not self.transport.is_closing():
            self._refuse(self._refusal)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_bytes, self._header_count, self._in_head = 0, 0, True
        self._app_started, self._body_bytes = False, 0
        if self._deadline is None:  # a kept-alive connection's next request
            self._arm(self.limits.header_seconds)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._refusal = 431
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        head = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if head > self.limits.max_header_bytes:  # a whole head that came in one read
            self._refusal = 431
            return  # answered once the parser returns; the app never starts
        self._in_head = False
        self._disarm()
        self._arm(self.limits.body_seconds)  # the whole body's time, however it trickles
        super().on_headers_complete()
        self._app_started = True

    def on_response_complete(self) -> None:
        self._busy, self._body_bytes = False, 0  # kept alive, it waits: no slot, no bytes
        super().on_response_complete()

    def _busy_elsewhere(self) -> list[GuardedHttpToolsProtocol]:
        """Other connections serving a request (from its whole body to its answer's end):
        a silent one, one trickling its head or body, or an idle kept-alive one holds no
        slot (its own deadline closes it), so a client that keeps reopening slow
        connections cannot keep everyone else at 503."""
        return [other for other in self._others() if other._busy]

    def on_body(self, body: bytes) -> None:
        if self._draining:  # refused mid-body: read and dropped, never held
            return
        self._body_bytes += len(body)
        if self._refusal:
            return
        held = sum(other._body_bytes for other in self._others())  # partial ones included
        if held and held + self._body_bytes > self.limits.max_inflight_bytes:
            # answered now; the rest of the body is read and dropped until it ends (or its
            # deadline), so that the client, still sending, reads the answer
            self._refusal, self._draining, self._body_bytes = 503, True, 0
            self._answer(503)
            return
        super().on_body(body)

    def _others(self) -> list[GuardedHttpToolsProtocol]:
        return [
            other
            for other in self.connections
            if isinstance(other, GuardedHttpToolsProtocol) and other is not self
        ]

    def on_message_complete(self) -> None:
        if self._draining:  # the body refused mid-way has ended: the answer went before
            self.transport.close()
            return
        self._disarm()
        serving = self._busy_elsewhere()
        held = sum(other._body_bytes for other in serving)
        # counted by connection alone: uvicorn's own limit also counts a kept-alive
        # connection's finishing request beside its next one, and refused those; a body
        # alone over the bytes' bound is served when nothing else is (--max-body-mb bounds it)
        if not self._refusal and (
            len(serving) >= self.limits.max_connections
            or (serving and held + self._body_bytes > self.limits.max_inflight_bytes)
        ):
            self._refusal = 503
            self._refuse(503)
            return
        if not self._refusal:
            self._busy = True  # a whole request: it holds a slot until it is answered
            super().on_message_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self, seconds: float) -> None:
        self._deadline = self.loop.call_later(seconds, self._too_slow)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _too_slow(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._draining or (self._in_head and not self._head_bytes):
            self.transport.close()  # answered already, or it never said a word
        else:
            self._refuse(408)

    def _refuse(self, status: int) -> None:
        """Answer ``status`` (unless the app has begun its own answer), then close."""
        self._disarm()
        self._answer(status)
        self.transport.close()

    def _answer(self, status: int) -> None:
        """Write the ``status`` answer, unless the app has begun its own."""
        retry = b""
        if status == 503:
            self.logger.warning(
                "over --max-connections (%d) or --max-inflight-mb (%d): answered 503",
                self.limits.max_connections,
                self.limits.max_inflight_bytes // 2**20,
            )
            retry = b"retry-after: %d\r\n" % RETRY_AFTER_SECONDS
        if not (self._app_started and self.cycle and self.cycle.response_started):
            body = b'{"error": "' + REASONS[status].lower() + b'"}'
            self.transport.write(
                b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\n%s"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s"
                % (status, REASONS[status], retry, len(body), body)
            )


def guarded_protocol(limits: ConnectionLimits) -> type[GuardedHttpToolsProtocol]:
    """The protocol class, held to ``limits``, for ``uvicorn.Config(http=...)``."""
    return type("GuardedHttpToolsProtocol", (GuardedHttpToolsProtocol,), {"limits": limits})
