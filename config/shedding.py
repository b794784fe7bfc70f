"""Load shedding at the door of the web process: past `limit` HTTP requests in flight, a request
is answered `503 {"error": {"code": "unavailable", ...}}` with `Retry-After` at once, before Django
spends anything on it (no thread, no middleware, no database connection).

Why: an ASGI server (daphne, uvicorn, granian) accepts every connection, and Django runs each request's sync code in a thread of its
own, so an overloaded process takes on ever more requests that all get slower together (measured:
a median of seconds). Refusing the excess keeps the admitted requests fast and tells clients when
to come back. WEB_MAX_IN_FLIGHT in the settings sets the limit (0: no limit).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from workflows.http import RETRY_AFTER_SECONDS

logger = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

BODY = json.dumps(
    {
        "error": {
            "code": "unavailable",
            "message": "the server is overloaded; try again shortly",
            "detail": None,
        }
    }
).encode()
HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BODY)).encode()),
    (b"retry-after", str(RETRY_AFTER_SECONDS).encode()),
]


class InFlightLimit:
    """ASGI middleware: at most `limit` HTTP requests of this process in the app at once (0: no
    limit). Other scopes (WebSocket, lifespan) pass untouched. One event loop runs it, so the
    counter needs no lock."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit
        self.in_flight = 0
        self.shed = 0  # refused since the last log line
        self._logged_at = 0.0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.limit <= 0:
            await self.app(scope, receive, send)
            return
        if self.in_flight >= self.limit:
            await self._refuse(send)
            return
        self.in_flight += 1
        answered = False

        async def send_and_count(message: MutableMapping[str, Any]) -> None:
            # A request stops counting once its response is complete, not when the app returns:
            # Django closes the response (the request_finished signal, in a thread) after the
            # last byte is sent, and a client with the answer in hand may already send its next
            # request (a readiness probe, then the first real one) — with a limit of 1, refused.
            nonlocal answered
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body") and not answered:
                answered = True
                self.in_flight -= 1

        try:
            await self.app(scope, receive, send_and_count)
        finally:
            if not answered:  # failed, disconnected or never answered: its place is freed here
                self.in_flight -= 1

    async def _refuse(self, send: Send) -> None:
        self.shed += 1
        now = time.monotonic()
        if now - self._logged_at >= 1.0:  # one line a second at most, however many are refused
            logger.warning(
                "overloaded: %d request(s) in flight, %d refused with 503 since the last report",
                self.in_flight,
                self.shed,
            )
            self._logged_at, self.shed = now, 0
        await send({"type": "http.response.start", "status": 503, "headers": HEADERS})
        await send({"type": "http.response.body", "body": BODY})
