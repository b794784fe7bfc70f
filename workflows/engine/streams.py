"""`step.stream`: a step's chunks on their way to readers, batched so a stream costs few commits.

A step writes `await step.stream.write(chunk)` (its own stream, named after the step), or
`step.stream("tokens", ephemeral=True).write(chunk)`; a sync step calls `write_sync`. A write is
checked (JSON, size, the attempt still running) and queued at once; the run's `StreamBatcher`
stores the queued chunks in one commit when 50 ms have passed since the first of them, or 4 KB
are waiting, whichever comes first, so 1,000 tokens cost tens of commits, not 1,000. Chunks go
through the run's commit pipeline: fenced by its lease like every write, in order, and stored
before the step's own record (the step drains them first). An ephemeral chunk is not stored: it
goes to the commit hooks (the live pages), for readers connected at that moment.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.exceptions import ValueTooLarge
from ..core.jsonvalue import dumps
from ..core.records import Commit, EventOrigin
from ..core.signals import Abandoned, Aborted
from ..core.streams import StreamChunk, StreamClosed, check_name, max_stream_bytes

LINGER = 0.05  # seconds a chunk may wait for others to share its commit
BATCH_BYTES = 4096  # ... or this many bytes waiting: commit now
BACKLOG_BYTES = 1024 * 1024  # an async writer ahead of the store by this much waits for it


class StreamBatcher:
    """The stream chunks of one execution, committed in batches (by time and size) in order."""

    def __init__(
        self, commit: Callable[[Commit], Awaitable[Any]], publish: Callable[[Commit], None] | None
    ) -> None:
        self._commit = commit
        self._publish = publish  # the runner's observers: ephemeral chunks go to the commit hooks
        self._chunks: list[StreamChunk] = []
        self._bytes = 0
        self._full = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    @property
    def backlog(self) -> int:
        return self._bytes

    def add(self, chunk: StreamChunk) -> None:
        """Queue a chunk (from the loop's thread or, for a sync step, its worker thread)."""
        self.in_loop(self._add, chunk)

    def in_loop(self, fn: Callable[..., None], *args: Any) -> None:
        """Call `fn(*args)` in the loop's thread: now from it, else soon, in the order asked."""
        if threading.get_ident() == self._loop_thread:
            fn(*args)
        else:
            self._loop.call_soon_threadsafe(fn, *args)

    def _add(self, chunk: StreamChunk) -> None:
        if chunk.ephemeral:
            if self._publish is not None:
                self._publish(Commit(stream_chunks=[chunk]))
            return
        self._chunks.append(chunk)
        self._bytes += chunk.size
        if self._bytes >= BATCH_BYTES:
            self._full.set()
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush())

    async def _flush(self) -> None:
        while self._chunks:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._full.wait(), LINGER)
            batch, self._chunks, self._bytes = self._chunks, [], 0
            self._full.clear()
            try:
                await self._commit(Commit(stream_chunks=batch))
            except (Aborted, Abandoned):  # the step's own commit will find out
                self._chunks, self._bytes = [], 0
                return

    async def drain(self) -> None:
        """Store what was queued now, without lingering (before a step's record, or to catch up)."""
        while self._flusher is not None and not self._flusher.done():
            self._full.set()
            await asyncio.shield(self._flusher)


class StreamWriter:
    """One stream of one step attempt. `step.stream` is the step's own; call it for another.

    `stored` is called (in the loop's thread) before the attempt's first stored chunk is queued:
    the step marks itself `running` there, so a crash after a chunk was stored records the attempt
    as lost, and the rerun writes its chunks as the next attempt, not as the same one again."""

    def __init__(
        self,
        batcher: StreamBatcher,
        origin: EventOrigin,
        name: str,
        *,
        ephemeral: bool = False,
        stored: Callable[[], None] | None = None,
    ) -> None:
        self._batcher = batcher
        self._origin = origin
        self.name = check_name(name)
        self.ephemeral = ephemeral
        self._stored = None if ephemeral else stored
        self._seq = 0
        self._bytes = 0
        self._closed = False
        self._others: dict[tuple[str, bool], StreamWriter] = {}

    def __call__(self, name: str | None = None, *, ephemeral: bool = False) -> StreamWriter:
        """The stream `name` of this run (this step's own when None), written by this attempt."""
        name = self.name if name is None else check_name(name)
        if (name, ephemeral) == (self.name, self.ephemeral):
            return self
        key = (name, ephemeral)
        if key not in self._others:
            self._others[key] = StreamWriter(
                self._batcher, self._origin, name, ephemeral=ephemeral, stored=self._stored
            )
        return self._others[key]

    async def write(self, chunk: Any) -> None:
        """Append `chunk` (JSON; text is a JSON string). Returns once it is queued, or, when the
        store has fallen far behind, once it caught up."""
        self.write_sync(chunk)
        if self._batcher.backlog >= BACKLOG_BYTES:
            await self._batcher.drain()

    def write_sync(self, chunk: Any) -> None:
        """`write` for a sync step (any thread): queued at once, never waits."""
        if self._closed:
            raise StreamClosed(
                f"stream {self.name!r} of step {self._origin.step!r} (attempt {self._origin.attempt}) is"
                " closed: a stream is written only while its step attempt runs"
            )
        what = f"a chunk of stream {self.name!r} (step {self._origin.step!r})"
        text = dumps(chunk, what)  # NotRecordable / ValueTooLarge: the step fails, naming itself
        size = len(text.encode())
        limit = max_stream_bytes()
        if limit is not None and self._bytes + size > limit:
            raise ValueTooLarge(
                f"stream {self.name!r} of step {self._origin.step!r}", self._bytes + size, limit
            )
        self._bytes += size
        data = chunk if isinstance(chunk, str) else json.loads(text)  # as a reader will see it
        if self._stored is not None:
            self._batcher.in_loop(self._stored)
            self._stored = None
        self._batcher.add(
            StreamChunk(
                stream=self.name, data=data, origin=self._origin, seq=self._seq, size=size,
                ephemeral=self.ephemeral,
            )
        )  # fmt: skip
        self._seq += 1

    def close(self) -> None:
        """The attempt ended: later writes raise StreamClosed."""
        self._closed = True
        for other in self._others.values():
            other.close()
