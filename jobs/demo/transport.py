"""The demo services as an httpx2.MockTransport (DEMO ONLY): in-process tests, no socket."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import httpx2

from .services import DROPPED, DemoRequest, DemoServices
from .streaming import StreamCut


def mock_transport(services: DemoServices) -> httpx2.MockTransport:
    def handle(request: httpx2.Request) -> httpx2.Response:
        result = services.handle(
            DemoRequest(
                method=request.method,
                path=request.url.path,
                query=dict(request.url.params),
                headers={k.lower(): v for k, v in request.headers.items()},
                body=request.content,
                host=request.url.netloc.decode(),
            )
        )
        if result is DROPPED:
            raise httpx2.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        if result.stream is not None:
            return httpx2.Response(
                result.status, headers=result.headers, stream=_Streamed(result.stream, request)
            )
        return httpx2.Response(result.status, headers=result.headers, content=result.body)

    return httpx2.MockTransport(handle)


class _Streamed(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A streamed answer's body for a sync or an async client. Async, each piece is made in a
    worker thread, so the demo's pace (a sleep between pieces) does not stall the event loop.
    A StreamCut is a connection lost mid-body, as over a socket."""

    def __init__(self, pieces: Iterator[bytes], request: httpx2.Request) -> None:
        self._pieces = pieces
        self._request = request

    def _cut(self) -> httpx2.RemoteProtocolError:
        return httpx2.RemoteProtocolError(
            "peer closed connection without sending complete message body", request=self._request
        )

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._pieces
        except StreamCut:
            raise self._cut() from None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                piece = await asyncio.to_thread(next, self._pieces, None)
            except StreamCut:
                raise self._cut() from None
            if piece is None:
                return
            yield piece

    def close(self) -> None:
        close = getattr(self._pieces, "close", None)
        if close is not None:
            try:
                close()
            except ValueError:  # still making a piece in its thread (the reader gave up): it ends there
                pass

    async def aclose(self) -> None:
        self.close()
