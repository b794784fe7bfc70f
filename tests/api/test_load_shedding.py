"""config/shedding.py: past the limit of requests in flight, an HTTP request is answered 503
JSON with Retry-After at once, without reaching the app; WebSockets and lifespan pass."""

from __future__ import annotations

import asyncio
import json

from config.shedding import InFlightLimit
from workflows.http.errors import RETRY_AFTER_SECONDS


class SlowApp:
    """An ASGI app that holds every request until `release` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await self.release.wait()
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})


async def request(app, scope_type: str = "http") -> list[dict]:
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    await app({"type": scope_type, "path": "/jobs", "method": "POST"}, receive, send)
    return sent


async def test_past_the_limit__503_json_with_retry_after_at_once():
    inner = SlowApp()
    app = InFlightLimit(inner, limit=2)
    admitted = [asyncio.create_task(request(app)) for _ in range(2)]
    await asyncio.sleep(0)  # both are inside the app now

    refused = await asyncio.wait_for(request(app), timeout=1)  # answered without waiting

    start, body = refused
    assert start["status"] == 503
    headers = dict(start["headers"])
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"retry-after"] == str(RETRY_AFTER_SECONDS).encode()
    assert int(headers[b"content-length"]) == len(body["body"])
    error = json.loads(body["body"])["error"]
    assert error["code"] == "unavailable" and error["detail"] is None
    assert inner.calls == 2 and app.in_flight == 2

    inner.release.set()
    for task in admitted:
        assert (await task)[0]["status"] == 202
    assert app.in_flight == 0
    assert (await request(app))[0]["status"] == 202  # room again


async def test_no_limit_and_other_scopes__pass_through():
    inner = SlowApp()
    inner.release.set()
    unlimited = InFlightLimit(inner, limit=0)
    assert [(await request(unlimited))[0]["status"] for _ in range(3)] == [202] * 3
    full = InFlightLimit(inner, limit=1)
    full.in_flight = 1  # as if one request were inside
    assert (await request(full, "websocket"))[0]["status"] == 202
    assert (await request(full))[0]["status"] == 503


async def test_an_app_error_frees_its_place():
    async def failing(scope, receive, send):
        raise RuntimeError("boom")

    app = InFlightLimit(failing, limit=1)
    for _ in range(2):
        try:
            await request(app)
        except RuntimeError:
            pass
    assert app.in_flight == 0


async def test_a_request_stops_counting_once_answered():
    """Django still closes the response (a thread hop) after the last byte: a client holding the
    answer may send its next request at once, and a limit of 1 must admit it."""
    cleanup = asyncio.Event()

    async def answers_then_cleans_up(scope, receive, send):
        await send({"type": "http.response.start", "status": 202, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})
        await cleanup.wait()

    app = InFlightLimit(answers_then_cleans_up, limit=1)
    first = asyncio.create_task(request(app))
    for _ in range(10):  # until the first request is answered (a few loop turns)
        await asyncio.sleep(0)
    assert app.in_flight == 0
    second = asyncio.create_task(request(app))
    for _ in range(10):
        await asyncio.sleep(0)
    cleanup.set()
    assert (await asyncio.wait_for(first, 1))[0]["status"] == 202
    assert (await asyncio.wait_for(second, 1))[0]["status"] == 202
    assert app.in_flight == 0
