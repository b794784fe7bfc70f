"""Streams: what a step writes while it runs (a model's tokens, a log), in chunks readers follow.

A chunk is JSON (text is a JSON string). Each carries the step attempt that wrote it and its
`seq`, its place among that attempt's chunks of that stream: a chunk with `seq` 0 starts the
step's text over (a retry, a crash's rerun, an operator's replay), so a reader that keeps the
latest attempt per step shows one attempt's text, never a mix. The recorded output is the source
of truth; a stream is what was seen on the way.

Limits: one chunk is a value like any other (`jsonvalue.max_bytes`, WORKFLOWS["MAX_VALUE_BYTES"]);
what one attempt writes to one stream is capped by `max_stream_bytes`
(WORKFLOWS["MAX_STREAM_BYTES"]). Over either, the write raises `ValueTooLarge` and the step fails
at once, naming itself; the refused chunk is not stored.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from .exceptions import BadInput
from .records import StreamChunk as StreamChunk  # defined with the commit that carries it

MAX_NAME = 200  # characters, as a step's name
DEFAULT_MAX_STREAM_BYTES = 16 * 1024 * 1024


class StreamClosed(BadInput):
    """A write after the step attempt that owned the stream ended (a reference kept past the
    step, a sync body still running after its timeout): nothing is stored."""


@dataclass(frozen=True, kw_only=True)
class ChunkRecord:
    """A stored chunk, as readers get it; `id` is the cursor to resume after."""

    id: int
    stream: str
    data: Any
    step: str
    attempt: int
    seq: int
    created_at: dt.datetime
    scope: str = ""

    def as_json(self) -> dict[str, Any]:
        """The one shape every reader sends (WebSocket `stream` frames, Server-Sent Events)."""
        return {
            "id": self.id, "stream": self.stream, "step": self.step, "attempt": self.attempt,
            "seq": self.seq, "data": self.data,
        }  # fmt: skip


def check_name(name: Any) -> str:
    """A stream's name: non-empty text of at most MAX_NAME characters (BadInput otherwise)."""
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        raise BadInput(f"a stream name is non-empty text of at most {MAX_NAME} characters, not {name!r}")
    return name


def _default_max_stream_bytes() -> int | None:
    return DEFAULT_MAX_STREAM_BYTES


_max_stream_bytes: Callable[[], int | None] = _default_max_stream_bytes


def set_max_stream_bytes(limit: Callable[[], int | None]) -> None:
    """Where the per-attempt stream cap comes from (read at each write; None: no cap)."""
    global _max_stream_bytes
    _max_stream_bytes = limit


def max_stream_bytes() -> int | None:
    return _max_stream_bytes()


def latest_attempts(chunks: Iterable[ChunkRecord]) -> dict[tuple[str, str], list[Any]]:
    """What a reader shows of one stream's chunks: per step (scope, name), in the order steps
    first wrote, the data of its latest attempt only (a chunk with `seq` 0 starts it over)."""
    shown: dict[tuple[str, str], list[Any]] = {}
    for chunk in chunks:
        key = (chunk.scope, chunk.step)
        if chunk.seq == 0 or key not in shown:
            shown[key] = []
        shown[key].append(chunk.data)
    return shown


def text_of(chunks: Iterable[ChunkRecord]) -> str:
    """The text a reader shows of a stream of text chunks (see `latest_attempts`)."""
    return "".join(d for parts in latest_attempts(chunks).values() for d in parts if isinstance(d, str))
