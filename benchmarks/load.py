"""A closed-loop HTTP load: N clients on one event loop, each on its own kept-alive
connection with one request outstanding, as load generators such as wrk and hey send it.

The benchmark's clients share the machine's cores with the server they measure, so they
are kept lean: each request is encoded once before the clock starts, and an answer is
read by its ``Content-Length`` and checked (status 200, one prediction a photo).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Request:
    """One POST, encoded whole, and how many predictions its answer must hold."""

    data: bytes
    photos: int


@dataclass
class Load:
    """What the clients saw: each request's seconds, and the wall seconds of them all."""

    latencies: list[float] = field(default_factory=list)
    wall_seconds: float = 0.0


def post(host: str, port: int, path: str, body: bytes, photos: int) -> Request:
    """A JSON POST of ``body`` on a kept-alive connection."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    )
    return Request(head.encode() + body, photos)


def send_all(host: str, port: int, requests: list[Request], clients: int) -> Load:
    """Send ``requests`` from ``clients`` concurrent connections; each client takes the
    next request as soon as its last one is answered."""
    return asyncio.run(_send_all(host, port, requests, clients))


async def _send_all(host: str, port: int, requests: list[Request], clients: int) -> Load:
    load, queue = Load(), iter(requests)
    connections = [await asyncio.open_connection(host, port) for _ in range(clients)]
    started = time.perf_counter()
    try:
        await asyncio.gather(*(_client(r, w, queue, load) for r, w in connections))
    finally:
        load.wall_seconds = time.perf_counter() - started
        for _, writer in connections:
            writer.close()
    return load


async def _client(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    queue: Iterator[Request],
    load: Load,
) -> None:
    for request in queue:  # one event loop: the clients share the iterator safely
        started = time.perf_counter()
        writer.write(request.data)
        status, body = await _answer(reader)
        load.latencies.append(time.perf_counter() - started)
        if status != 200:
            raise RuntimeError(f"expected 200, found {status}: {body[:300]!r}")
        found = len(json.loads(body)["predictions"])
        if found != request.photos:
            raise RuntimeError(f"expected {request.photos} predictions, found {found}")


async def _answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    """The status and body of one HTTP/1.1 answer framed by ``Content-Length``."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(
        int(line.split(":", 1)[1]) for line in lines if line.lower().startswith("content-length:")
    )
    return status, await reader.readexactly(length)
