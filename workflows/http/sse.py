"""A run's stream as Server-Sent Events (`text/event-stream`), for the API and the inspector.

Each stored chunk is one event: `id:` its id (the cursor: a browser's EventSource sends it back
as `Last-Event-ID` when it reconnects, and that wins over `?after=`), `event: chunk`, `data:` the
chunk as JSON (`{"id", "stream", "step", "attempt", "seq", "data"}`, masked like every read; a
chunk with `seq` 0 starts its step's text over). Once the run has finished and every chunk was
sent, `event: end` (`data: {"status": ...}`) and the response ends: an EventSource should close
then, or it reconnects. A comment line every `KEEPALIVE` seconds keeps idle proxies from cutting
the connection. The response reads the database every `POLL` seconds while chunks come, less
often (up to `POLL_MAX`) while none does; a chunk is stored at most 50 ms after it was written,
so a reader lags by about that plus the poll.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator

from asgiref.sync import sync_to_async
from django.http import HttpRequest, StreamingHttpResponse

from ..core.records import TERMINAL
from ..core.streams import ChunkRecord
from ..masking import mask
from ..models import Run, StreamChunk
from ..storage.django.rows import chunks_after

POLL = 0.2  # seconds between reads while chunks come ...
POLL_MAX = 1.0  # ... growing to this while none does
KEEPALIVE = 15.0  # seconds between comment lines on an idle stream
BATCH = 500  # chunks per read while catching up


class UnknownStream(LookupError):
    """No such run, or a finished run that never wrote this stream (answered 404)."""


def resume_point(request: HttpRequest, after: int) -> int:
    """Where to start: the `Last-Event-ID` header of a reconnecting EventSource, else `after`."""
    last = request.headers.get("Last-Event-ID", "").strip()
    return int(last) if last.isdigit() else after


def check_stream(run_id: str, name: str | None) -> None:
    """UnknownStream unless the run exists and the stream has chunks or may still get some
    (the run has not finished: a step may not have started writing yet). None: every stream."""
    status = Run.objects.filter(id=run_id).values_list("status", flat=True).first()
    if status is None:
        raise UnknownStream(f"run {run_id} not found")
    if name is None:
        return
    if status in TERMINAL and not StreamChunk.objects.filter(run_id=run_id, stream=name).exists():
        raise UnknownStream(f"run {run_id} has no stream {name!r}")


def stream_response(run_id: str, name: str | None, after: int) -> StreamingHttpResponse:
    """The SSE response of stream `name` (None: every stream of the run; call `check_stream`
    first: a 404 is decided before the stream starts)."""
    response = StreamingHttpResponse(sse_events(run_id, name, after), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each event on at once
    return response


def _status(run_id: str) -> str | None:
    return Run.objects.filter(id=run_id).values_list("status", flat=True).first()


async def sse_events(run_id: str, name: str | None, after: int) -> AsyncIterator[bytes]:
    read = sync_to_async(chunks_after)
    status_of = sync_to_async(_status)
    quiet_since = time.monotonic()
    idle = 0  # reads in a row that found nothing: the wait between reads grows to POLL_MAX
    yield b"retry: 1000\n\n"
    while True:
        status = await status_of(run_id)  # read before the chunks: none can follow a finished run's
        chunks = await read(run_id, name, after=after, limit=BATCH)
        for chunk in chunks:
            yield encode(chunk)
            after = chunk.id
        if len(chunks) == BATCH:
            continue
        if chunks:
            quiet_since, idle = time.monotonic(), 0
        if status is None or status in TERMINAL:
            yield b"event: end\ndata: " + json.dumps({"status": status}).encode() + b"\n\n"
            return
        if time.monotonic() - quiet_since >= KEEPALIVE:
            yield b": keepalive\n\n"
            quiet_since = time.monotonic()
        await asyncio.sleep(min(POLL * 2**idle, POLL_MAX))
        idle = min(idle + 1, 8)


def encode(chunk: ChunkRecord) -> bytes:
    data = json.dumps({**chunk.as_json(), "data": mask(chunk.data)}, separators=(",", ":"))
    return f"id: {chunk.id}\nevent: chunk\ndata: {data}\n\n".encode()
