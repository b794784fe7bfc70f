"""The demo model's streamed answers (DEMO ONLY): an OpenAI chat completion sent as Server-Sent
Events, a piece at a time, at a pace (`DEMO_TOKEN_MS`), so a client's streaming can be watched
and broken (`cut:<n>`) without a real model.

The stream is a plain iterator of bytes, one event each: the server writes it as a chunked body,
the mock transport hands it to httpx2. A cut is the iterator raising `StreamCut`: the server then
closes the connection mid-body, the transport raises httpx2.RemoteProtocolError."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

EVENT_STREAM_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
PIECE_RE = re.compile(r"\s*\S+\s*|\s+")  # a word with the spaces after it (leading ones: the first's)
BAD_CHUNK = b"data: {choices: [oops\n\n"  # what `bad-json` streams: a data line that is not JSON
DONE = b"data: [DONE]\n\n"


class StreamCut(Exception):
    """The stream stops here without its end: whoever writes it closes the connection."""


def wants_stream(body: dict[str, Any]) -> bool:
    return body.get("stream") is True


def pieces(content: str) -> list[str]:
    """The content split as a model streams it, roughly a token a piece; they join to it again."""
    return PIECE_RE.findall(content)


def event(data: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def completion_events(
    completion: dict[str, Any],
    body: dict[str, Any],
    kind: str,
    token_ms: float = 0.0,
    wait: Callable[[float], Any] = time.sleep,
) -> Iterator[bytes]:
    """The events of a whole `chat.completion` (as the demo answers it unstreamed), streamed:
    a chunk per piece of content, a chunk per tool call, `token_ms` apart, a last chunk with the finish reason, the
    usage when `stream_options.include_usage` asks for it, then `[DONE]`. `kind` `bad-json`
    streams a chunk that is not JSON; `cut:<n>` stops after n pieces (StreamCut). `wait` sleeps
    between pieces (the services pass one a reset cuts short)."""
    if kind == "bad-json":
        yield BAD_CHUNK
        yield DONE
        return
    cut_after = int(kind.partition(":")[2]) if kind.startswith("cut") else None
    choice = completion["choices"][0]
    head = {"id": completion["id"], "object": "chat.completion.chunk", "model": completion["model"]}

    def chunk(delta: dict[str, Any], finish_reason: str | None) -> bytes:
        return event({**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})

    for sent, piece in enumerate(pieces(choice["message"].get("content") or "")):
        if sent == cut_after:
            raise StreamCut(f"cut after {sent} pieces")
        if sent and token_ms:
            wait(token_ms / 1000)
        yield chunk({"content": piece}, None)
    if cut_after is not None:
        raise StreamCut("cut before the end")
    for index, call in enumerate(choice["message"].get("tool_calls") or []):  # each call whole
        yield chunk({"tool_calls": [{"index": index, **call}]}, None)
    yield chunk({}, choice.get("finish_reason", "stop"))
    options = body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage") is True:
        yield event({**head, "choices": [], "usage": completion["usage"]})
    yield DONE
