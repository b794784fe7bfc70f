"""The model client: OpenAI chat completions at OPENAI_BASE_URL (any compatible server), whole or
streamed as Server-Sent Events (`on_text` sees each piece of the answer as it arrives)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2
from django.conf import settings

from .http import ERROR_TEXT_LIMIT, InvalidReply, calling, json_body, raise_for_status

MODEL_TIMEOUT = 120.0  # seconds: the step's own timeout is the same; streamed, a limit per read
STREAM_END = "[DONE]"  # the data of the last Server-Sent Event of an OpenAI stream

TextSink = Callable[[str], Awaitable[Any]]


@dataclass(frozen=True)
class Completion:
    content: str
    usage: dict[str, Any] = field(default_factory=dict)  # the response's token counts, as given
    request_model: str = ""  # the model asked for (OPENAI_MODEL) ...
    response_model: str = ""  # ... and the one that answered, as the response names it

    def gen_ai(self) -> dict[str, Any]:
        """What a model step records as `step.meta["gen_ai"]`: its trace span then carries the
        GenAI semantic conventions (workflows.telemetry.tracing; token counts from `usage`)."""
        recorded: dict[str, Any] = {"operation": "chat", "provider": "openai"}
        if self.request_model:
            recorded["request_model"] = self.request_model
        if self.response_model:
            recorded["response_model"] = self.response_model
        return recorded


async def complete(
    client: httpx2.AsyncClient,
    messages: list[dict[str, str]],
    *,
    json_object: bool = False,
    on_text: TextSink | None = None,
) -> Completion:
    """One chat completion. 429/5xx retry (RetryAfter when the server says when); other 4xx raise
    CriticalError with the response text; a reply without message content is InvalidReply.

    With `on_text`, the answer is streamed: `await on_text(piece)` for each piece of content, in
    order, as it arrives; the Completion is the same. A stream that breaks off (no `[DONE]`, a
    connection lost) is a retryable error, and the step's next attempt starts the answer over."""
    payload: dict[str, Any] = {"model": settings.OPENAI_MODEL, "messages": messages}
    if json_object:
        payload["response_format"] = {"type": "json_object"}
    headers = {"Authorization": f"Bearer {settings.OPENAI_API_KEY}"} if settings.OPENAI_API_KEY else {}
    url = settings.OPENAI_BASE_URL.rstrip("/") + "/chat/completions"
    if on_text is not None:
        payload["stream"] = True
        payload["stream_options"] = {"include_usage": True}
        return await _streamed(client, url, payload, headers, on_text)
    with calling("model"):
        response = await client.post(url, json=payload, headers=headers, timeout=MODEL_TIMEOUT)
    raise_for_status(response, "model")
    return _whole(json_body(response, "model"))


def _whole(data: Any) -> Completion:
    """The Completion of a whole (not streamed) answer."""
    try:
        content = data["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise InvalidReply(f"model returned no message content: {str(data)[:200]}") from None
    if not isinstance(content, str):
        raise InvalidReply(f"model returned no message content: {str(data)[:200]}")
    usage = data.get("usage") if isinstance(data, dict) else None
    answered_by = data.get("model") if isinstance(data, dict) else None
    return Completion(
        content=content,
        usage=usage if isinstance(usage, dict) else {},
        request_model=settings.OPENAI_MODEL or "",
        response_model=answered_by if isinstance(answered_by, str) else "",
    )


async def _streamed(
    client: httpx2.AsyncClient, url: str, payload: dict[str, Any], headers: dict[str, str], on_text: TextSink
) -> Completion:
    """Ask for a stream and read it. The status is judged before the stream is read; a server
    that answers a whole JSON completion anyway is taken as one piece."""
    with calling("model"):
        async with client.stream(
            "POST", url, json=payload, headers=headers, timeout=MODEL_TIMEOUT
        ) as response:
            if response.status_code >= 400:
                await response.aread()  # the error's text, for raise_for_status
            raise_for_status(response, "model")
            if response.headers.get("Content-Type", "").startswith("application/json"):
                await response.aread()
                whole = _whole(json_body(response, "model"))
                if whole.content:
                    await on_text(whole.content)
                return whole
            reply, done = _StreamedReply(), None
            async with contextlib.aclosing(_sse_data(response)) as events:
                async for data in events:
                    if done is not None:  # read to the end: the connection then goes back to the pool
                        continue
                    if data == STREAM_END:
                        done = reply.completion()
                        continue
                    piece = reply.take(data)
                    if piece:
                        await on_text(piece)
            if done is not None:
                return done
    raise InvalidReply(f"model stream ended before {STREAM_END} ({len(reply.content)} characters in)")


async def _sse_data(response: httpx2.Response) -> AsyncIterator[str]:
    """The data of each Server-Sent Event (its `data:` lines joined); comments, other fields and
    an unfinished last event are skipped, as the SSE rules say."""
    lines: list[str] = []
    async for line in response.aiter_lines():
        if not line:
            if lines:
                yield "\n".join(lines)
            lines = []
        elif line.startswith("data:"):
            lines.append(line[5:].removeprefix(" "))
        # `:comment`, `event:`, `id:`, `retry:` lines carry nothing a completion needs


class _StreamedReply:
    """What the chunks of a stream add up to: the content, the usage and the answering model."""

    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.usage: dict[str, Any] = {}
        self.model = ""
        self.saw_choice = False

    @property
    def content(self) -> str:
        return "".join(self.pieces)

    def take(self, data: str) -> str:
        """One chunk: the piece of content it adds ("" when none)."""
        try:
            chunk = json.loads(data)
        except ValueError:
            raise InvalidReply(
                f"model streamed a chunk that is not JSON: {data[:ERROR_TEXT_LIMIT]!r}"
            ) from None
        if not isinstance(chunk, dict):
            raise InvalidReply(f"model streamed a chunk that is not an object: {data[:200]!r}")
        if "error" in chunk:  # a server's failure after the stream began
            raise InvalidReply(f"model stream failed: {str(chunk['error'])[:ERROR_TEXT_LIMIT]}")
        if isinstance(chunk.get("model"), str):
            self.model = chunk["model"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""
        self.saw_choice = True
        delta = choices[0].get("delta")
        piece = delta.get("content") if isinstance(delta, dict) else None
        if isinstance(piece, str) and piece:
            self.pieces.append(piece)
            return piece
        return ""

    def completion(self) -> Completion:
        if not self.saw_choice:
            raise InvalidReply("model stream carried no message content")
        return Completion(
            content=self.content,
            usage=self.usage,
            request_model=settings.OPENAI_MODEL or "",
            response_model=self.model,
        )
