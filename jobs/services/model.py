"""The model client: OpenAI chat completions at OPENAI_BASE_URL (any compatible server)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import httpx
from django.conf import settings

from .http import InvalidReply, calling, json_body, raise_for_status

MODEL_TIMEOUT = 120.0  # seconds: the step's own timeout is the same


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
    client: httpx.AsyncClient, messages: list[dict[str, str]], *, json_object: bool = False
) -> Completion:
    """One chat completion. 429/5xx retry (RetryAfter when the server says when); other 4xx raise
    CriticalError with the response text; a reply without message content is InvalidReply."""
    payload: dict[str, Any] = {"model": settings.OPENAI_MODEL, "messages": messages}
    if json_object:
        payload["response_format"] = {"type": "json_object"}
    headers = {"Authorization": f"Bearer {settings.OPENAI_API_KEY}"} if settings.OPENAI_API_KEY else {}
    url = settings.OPENAI_BASE_URL.rstrip("/") + "/chat/completions"
    with calling("model"):
        response = await client.post(url, json=payload, headers=headers, timeout=MODEL_TIMEOUT)
    raise_for_status(response, "model")
    data = json_body(response, "model")
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
