"""The demo services as an httpx.MockTransport (DEMO ONLY): in-process tests, no socket."""

from __future__ import annotations

import httpx

from .services import DROPPED, DemoRequest, DemoServices


def mock_transport(services: DemoServices) -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
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
            raise httpx.RemoteProtocolError(
                "Server disconnected without sending a response.", request=request
            )
        return httpx.Response(result.status, headers=result.headers, content=result.body)

    return httpx.MockTransport(handle)
