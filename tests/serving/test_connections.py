"""Slow and greedy clients against the real model server on 127.0.0.1: each loses its
own connection, and everyone else is still served."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.serving.test_server import V1, b64, good_answer, read_reply
from tests.support.helpers import png_of_zeros
from tests.support.models import seeded_model
from tests.support.servers import ModelServerProcess

pytestmark = pytest.mark.integration
TIGHT = (
    *("--max-connections", "4", "--header-timeout-seconds", "1"),
    *("--body-timeout-seconds", "1", "--idle-timeout-seconds", "1"),
    *("--max-header-kb", "8", "--max-headers", "20"),
    *("--max-request-megapixels", "2000"),  # room for the client that leaves, below
)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = seeded_model(tmp_path_factory.mktemp("conn") / "model")
    with ModelServerProcess(model, tmp_path_factory.mktemp("conn-log"), *TIGHT) as running:
        yield running


@pytest.fixture(scope="module")
def photo(sample_images) -> bytes:
    return next((sample_images / "PetImages/Dog").glob("*.jpg")).read_bytes()


def connect(server) -> socket.socket:
    return socket.create_connection(("127.0.0.1", server.port), timeout=10)


def test_connections_that_say_nothing_lose_their_slots_to_the_others(server, photo):
    silent = [connect(server) for _ in range(6)]  # more than the 4 slots
    try:
        time.sleep(2)  # past the 1 s head deadline
        assert good_answer(server, photo)["class"] in ("cat", "dog")
        for sock in silent:  # each was closed, with no answer: it asked nothing
            assert read_reply(sock) == ""
    finally:
        for sock in silent:
            sock.close()


def test_a_head_trickled_byte_by_byte_is_answered_408_and_closed(server, photo):
    with connect(server) as sock:
        sock.sendall(b"POST " + V1.encode() + b" HTTP/1.1\r\nHost: x\r\n")
        sent = 0
        with contextlib.suppress(OSError):
            for _ in range(40):  # a byte every 0.1 s: never a whole head
                sock.sendall(b"X")
                sent += 1
                time.sleep(0.1)
        reply = read_reply(sock)
        assert sent < 40  # closed on it before it was done trickling
    assert reply.startswith("HTTP/1.1 408")
    assert good_answer(server, photo)["class"] in ("cat", "dog")


def test_a_body_that_never_comes_is_answered_408(server):
    with connect(server) as sock:
        sock.sendall(
            f"POST {V1} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: 1000\r\n\r\n{".encode()
        )
        assert read_reply(sock).startswith("HTTP/1.1 408")


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Huge": "h" * 20_000},  # 20 KB, over the 8 KiB head
        {f"X-Many-{i}": "1" for i in range(50)},  # over 20 headers
    ],
    ids=["too large", "too many"],
)
def test_a_head_over_its_size_or_count_is_431_and_the_server_answers_after(server, photo, headers):
    answer = requests.get(f"{server.url}/v1/models/dogs-vs-cats", headers=headers, timeout=10)
    assert answer.status_code == 431
    assert good_answer(server, photo)["class"] in ("cat", "dog")


def test_a_flood_of_header_bytes_does_not_grow_the_server(server, photo):
    before = server.rss_bytes()
    with connect(server) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nX-Flood: ")
        with contextlib.suppress(OSError):
            for _ in range(2000):  # 128 MB, were it all read
                sock.sendall(b"f" * 65536)
        reply = read_reply(sock)
    assert reply == "" or reply.startswith("HTTP/1.1 431")
    assert server.rss_bytes() - before < 50 * 1024**2
    assert good_answer(server, photo)["class"] in ("cat", "dog")


def test_a_client_that_leaves_stops_the_work_of_its_request(server, photo):
    blank = png_of_zeros(7000, 7000)  # 49 million pixels, about 0.1 s to decode each
    body = json.dumps({"instances": [{"image": {"b64": b64(blank)}}] * 32}).encode()
    with connect(server) as sock:
        sock.sendall(
            f"POST {V1} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )
        time.sleep(0.3)  # its photos are being decoded
    deadline = time.monotonic() + 30
    while "client gone: stopped POST" not in server.log_tail() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "client gone: stopped POST /v1/models/dogs-vs-cats:predict" in server.log_tail()
    gone_at = last = server.cpu_seconds()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # until the server is idle again
        time.sleep(1.0)
        now, last = last, server.cpu_seconds()
        if last - now < 0.05:
            break
    # the photo being decoded when it left finishes; none of the 25 and more left starts
    assert server.cpu_seconds() - gone_at < 1.0
    assert good_answer(server, photo)["class"] in ("cat", "dog")


def test_as_many_kept_alive_clients_as_connections_are_all_served(server, photo):
    """Four clients on the four connections, each sending its next request the moment the
    last is answered (uvicorn's own limit counted a finishing request beside the next one
    on the same connection, and refused some with 503)."""
    body = {"instances": [{"image": {"b64": b64(photo)}}]}

    def client(_) -> list[int]:
        with requests.Session() as session:
            return [
                session.post(server.url + V1, json=body, timeout=60).status_code for _ in range(60)
            ]

    with ThreadPoolExecutor(4) as pool:
        codes = [code for answers in pool.map(client, range(4)) for code in answers]
    assert codes == [200] * 240


def read_answer(sock: socket.socket) -> str:
    """One answer's head and body, read as its content-length says, the connection left
    open (the server reads and drops the rest of a body it refused)."""
    reply = b""
    while b"\r\n\r\n" not in reply:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole answer: {reply[:200]!r}"
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    length = int(
        next(
            line.split(b":")[1]
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        )
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, f"closed before a whole answer: {head[:200]!r}"
        body += chunk
    return (head + b"\r\n\r\n" + body).decode(errors="replace")


def closed_by_server(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # open, nothing sent
    except OSError:
        return True


def test_a_client_reopening_silent_connections_as_they_close_holds_no_slot(server, photo):
    """Ten times the slots in silent connections, reopened as the server closes them for
    the whole time: every other client's requests are still answered."""
    stop = time.monotonic() + 4
    opened: list[socket.socket] = []

    def flood() -> None:
        while time.monotonic() < stop:
            for sock in [s for s in opened if closed_by_server(s)]:
                sock.close()
                opened.remove(sock)
            while len(opened) < 40:
                opened.append(connect(server))
            time.sleep(0.05)

    with ThreadPoolExecutor(1) as pool:
        attack = pool.submit(flood)
        answers = []
        for pause in (0.5, 1.0, 1.0):  # before, while and after the server closes them
            time.sleep(pause)
            answers.append(good_answer(server, photo)["class"])
        attack.result()
    for sock in opened:
        sock.close()
    assert set(answers) <= {"cat", "dog"} and len(answers) == 3


def test_clients_trickling_their_bodies_hold_no_slot(server, photo):
    """32 connections (eight times the slots) that send a whole POST head, then a body
    byte every 0.3 s, each reopened when the server answers 408: the slots are kept for
    complete requests, so another client is answered within 10 s, every time."""
    stop = time.monotonic() + 4
    head = (
        f"POST {V1} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n"
    ).encode()

    def trickle() -> None:
        while time.monotonic() < stop:
            with connect(server) as sock, contextlib.suppress(OSError):
                sock.sendall(head)
                while time.monotonic() < stop and not closed_by_server(sock):
                    sock.sendall(b" ")
                    time.sleep(0.3)

    with ThreadPoolExecutor(32) as pool:
        attack = [pool.submit(trickle) for _ in range(32)]
        times = []
        for _ in range(3):
            time.sleep(0.7)
            started = time.monotonic()
            assert good_answer(server, photo)["class"] in ("cat", "dog")
            times.append(time.monotonic() - started)
        for done in attack:
            done.result()
    assert max(times) < 10


# what components/serving/connections.py overrides of uvicorn's httptools protocol
HOOKS = {
    "connection_made": ["self", "transport"],
    "data_received": ["self", "data"],
    "on_message_begin": ["self"],
    "on_header": ["self", "name", "value"],
    "on_headers_complete": ["self"],
    "on_body": ["self", "body"],
    "on_message_complete": ["self"],
    "on_response_complete": ["self"],
    "connection_lost": ["self", "exc"],
}
# and what it reads of the protocol's own state
STATE = [
    "self.connections",
    "self.cycle",
    "self.transport",
    "self.loop",
    "self.logger",
    "self.url",
    "self.headers",
]


def test_uvicorns_protocol_still_has_what_the_connection_limits_hook():
    """The server's one use of another project's private parts: uvicorn has no setting for
    a request head's or body's deadline or its header count, so ``connections`` subclasses
    its httptools protocol. A uvicorn that renames or reshapes what it overrides or reads
    fails here, naming it, not in a served pod."""
    import inspect

    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    for name, parameters in HOOKS.items():
        hook = getattr(HttpToolsProtocol, name, None)
        assert hook is not None, f"uvicorn's HttpToolsProtocol has no {name} any more"
        assert list(inspect.signature(hook).parameters) == parameters, name
    source = inspect.getsource(HttpToolsProtocol)
    assert [state for state in STATE if state not in source] == []


def test_bodies_past_the_bound_in_flight_are_answered_503_with_retry_after(tmp_path, photo):
    """Eight requests of over 0.5 MiB completed at the same moment under a 1 MiB bound on the
    bodies served at once: one is served at a time, the others are told to come back;
    a one-photo request afterwards is answered."""
    model = seeded_model(tmp_path / "model")
    bound = ("--max-body-mb", "1", "--max-inflight-mb", "1")
    body = json.dumps({"instances": [{"image": {"b64": b64(photo)}}] * 64}).encode()
    assert 2**19 < len(body) < 2**20  # two of them are over the bound
    head = (
        f"POST {V1} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    with ModelServerProcess(model, tmp_path, *bound) as server:
        sockets = [connect(server) for _ in range(8)]
        try:
            for sock in sockets:  # all but each body's last byte
                sock.sendall(head + body[:-1])
            for sock in sockets:  # then the last bytes, back to back
                sock.sendall(body[-1:])
            replies = [read_reply(sock) for sock in sockets]
        finally:
            for sock in sockets:
                sock.close()
        statuses = [reply.split(" ", 2)[1] for reply in replies]
        assert "200" in statuses and "503" in statuses, statuses
        refused = [reply for reply in replies if reply.startswith("HTTP/1.1 503")]
        assert all("retry-after: 1\r\n" in reply.lower() for reply in refused)
        assert good_answer(server, photo)["class"] in ("cat", "dog")


@pytest.mark.parametrize("chunked", [False, True])
def test_bodies_stalled_part_way_count_toward_the_bound_as_their_bytes_arrive(
    tmp_path, photo, chunked
):
    """Eight clients each send over 0.5 MiB of a body and stall, within the body's deadline,
    under a 1 MiB bound on the bytes in flight: the first holds its bytes, each next is
    answered 503 as its bytes cross the bound (the rest of its body read and dropped), not
    left to grow the server; the first, completed, is served."""
    model = seeded_model(tmp_path / "model")
    bound = ("--max-body-mb", "1", "--max-inflight-mb", "1", "--body-timeout-seconds", "30")
    body = json.dumps({"instances": [{"image": {"b64": b64(photo)}}] * 64}).encode()
    assert 2**19 < len(body) < 2**20  # two of them are over the bound
    framing = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}"
    head = (
        f"POST {V1} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"{framing}\r\nConnection: close\r\n\r\n"
    ).encode()
    part = body[:-1]
    sent = b"%x\r\n%s\r\n" % (len(part), part) if chunked else part
    rest = b"1\r\n%s\r\n0\r\n\r\n" % body[-1:] if chunked else body[-1:]
    with ModelServerProcess(model, tmp_path, *bound) as server:
        sockets = [connect(server) for _ in range(8)]
        try:
            sockets[0].sendall(head + sent)
            time.sleep(0.5)  # the first one's bytes are in before the others'
            for sock in sockets[1:]:
                sock.sendall(head + sent)
            refused = [read_answer(sock) for sock in sockets[1:]]  # without their last byte
            sockets[0].sendall(rest)
            served = read_reply(sockets[0])
        finally:
            for sock in sockets:
                sock.close()
        assert all(reply.startswith("HTTP/1.1 503") for reply in refused), refused
        assert served.startswith("HTTP/1.1 200"), served[:200]
        assert good_answer(server, photo)["class"] in ("cat", "dog")


def test_clients_that_leave_mid_body_leave_one_line_each_in_the_log(server, photo):
    before = server.log_path.read_text()
    head = (
        f"POST {V1} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        "Content-Length: 100000\r\n\r\n"
    ).encode()
    for _ in range(3):
        with connect(server) as sock:
            sock.sendall(head + b" " * 50_000)
            time.sleep(0.2)
    assert good_answer(server, photo)["class"] in ("cat", "dog")
    deadline = time.monotonic() + 30  # the log is written as the server gets to it
    while time.monotonic() < deadline:
        written = server.log_path.read_text()[len(before) :]
        if written.count("client gone mid-body") >= 3:
            break
        time.sleep(0.1)
    assert written.count("client gone mid-body") == 3 and "Traceback" not in written
