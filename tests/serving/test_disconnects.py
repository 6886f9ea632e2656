"""A request whose client has gone is stopped; one answered in full is not."""

from __future__ import annotations

import asyncio
import logging

import pytest

from components.serving.disconnects import StopWhenClientLeaves

BODY = {"type": "http.request", "body": b"{}", "more_body": False}
GONE = {"type": "http.disconnect"}


def scripted_receive(*messages, pause: float = 0.05):
    queue = list(messages)

    async def receive():
        if len(queue) > 1 and queue[0] is GONE:
            await asyncio.sleep(pause)  # the client leaves a moment after its body
        return queue.pop(0) if queue else await asyncio.sleep(3600)

    return receive


def run(app, receive) -> list[dict]:
    sent: list[dict] = []

    async def send(message) -> None:
        sent.append(message)

    async def main() -> None:
        await asyncio.wait_for(StopWhenClientLeaves(app)({"type": "http"}, receive, send), 5)

    asyncio.run(main())
    return sent


def test_the_work_of_a_client_that_left_is_cancelled(caplog):
    reached = []

    async def slow_app(scope, receive, send) -> None:
        await receive()  # the body
        await asyncio.sleep(30)  # decoding, say
        reached.append("the end")

    with caplog.at_level(logging.INFO):
        assert run(slow_app, scripted_receive(BODY, GONE, GONE)) == []
    assert reached == [] and "client gone" in caplog.text


def test_an_answer_sent_in_full_is_not_cut_by_the_disconnect_that_follows_it():
    finished = []

    async def app(scope, receive, send) -> None:
        await receive()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok", "more_body": False})
        await asyncio.sleep(0.2)  # tidying up after the answer, as servers do
        finished.append(True)

    # uvicorn reports a disconnect once the answer is complete: that one is no client leaving
    sent = run(app, scripted_receive(BODY, GONE, pause=0.01))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert finished == [True]


def test_a_cancellation_from_outside_goes_on_out():
    async def app(scope, receive, send) -> None:
        await receive()
        await asyncio.sleep(30)

    async def main() -> None:
        task = asyncio.ensure_future(
            StopWhenClientLeaves(app)({"type": "http"}, scripted_receive(BODY), _ignore)
        )
        await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())


async def _ignore(message) -> None:
    pass
