"""The load generator's HTTP/1.1 client: keep-alive connections over asyncio streams, each
request on an idle connection or a new one, so no request waits behind another (open loop).

Why not an HTTP client library here: httpx 0.28's connection pool matched every queued request
against every connection on each change, so with hundreds of requests outstanding (a server
slowing down for a moment at 200 requests/s) the generator's own event loop saturated, sent late
and read late, and the latencies it printed were its own (seen: web CPU at 26 % and p50 of 9 s).
This one does O(1) work per request, whatever client the app itself uses. It speaks just what the
bench needs: POST with a body, answers with Content-Length.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass
class Answer:
    status_code: int
    headers: dict[str, str]  # lower-case names
    body: bytes


class ConnectionFailed(OSError):
    """Refused, reset or closed before a whole answer."""


class Client:
    """POSTs to one server over a pool of keep-alive connections; idle ones older than
    `keepalive_expiry` are closed instead of reused (the server may be closing them)."""

    def __init__(self, base: str, keepalive_expiry: float) -> None:
        parts = urlsplit(base)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.keepalive_expiry = keepalive_expiry
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> Answer:
        reader, writer = await self._connection()
        head = "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        request = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{head}Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        try:
            writer.write(request + body)
            answer = await _read_answer(reader)
        except (OSError, asyncio.IncompleteReadError, ValueError) as exc:
            writer.close()
            raise ConnectionFailed(str(exc) or type(exc).__name__) from exc
        except BaseException:  # cancelled (the deadline): the connection is in an unknown state
            writer.close()
            raise
        if answer.headers.get("connection", "").lower() == "close":
            writer.close()
        else:
            self._idle.append((reader, writer, time.monotonic()))
        return answer

    async def _connection(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        now = time.monotonic()
        while self._idle:
            reader, writer, since = self._idle.pop()
            if now - since < self.keepalive_expiry and not reader.at_eof():
                return reader, writer
            writer.close()
        try:
            return await asyncio.open_connection(self.host, self.port)
        except OSError as exc:
            raise ConnectionFailed(str(exc)) from exc

    async def aclose(self) -> None:
        for _reader, writer, _since in self._idle:
            writer.close()
        self._idle.clear()


async def _read_answer(reader: asyncio.StreamReader) -> Answer:
    status_line = await reader.readuntil(b"\r\n")
    status = int(status_line.split(b" ", 2)[1])
    headers: dict[str, str] = {}
    while True:
        line = await reader.readuntil(b"\r\n")
        if line == b"\r\n":
            break
        name, _, value = line.decode("latin1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        raise ValueError("an answer with neither Content-Length nor chunks")
    return Answer(status, headers, body)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    chunks = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")  # the end (no trailers expected)
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        await reader.readexactly(2)
