"""The demo model's tool calling (DEMO ONLY): OpenAI `tools` / `tool_calls`, answered by fixed
rules so tests can count every call.

A chat completion whose request lists `tools` is served on the route `agent`. The rules:

1. The prompt is the conversation's first user message. The tools *asked for* are those whose
   name appears in it, in the order of the request's `tools`.
2. Each turn calls the next tool asked for that no earlier assistant message called: one tool
   call per response, so a conversation with two tools takes three model turns.
3. A tool's arguments come from the prompt: for each property of its JSON schema, the text after
   `<property>=` up to the end of that line (a number for an integer or number property); a
   property the prompt does not give is the whole prompt (string) or 0 (number).
4. When no tool asked for is left (or none was asked for), the answer is text: "Done." followed
   by each tool result of the conversation, one line each, as `<tool>: <result>`.

The tool call ids are `call_<turn>_<tool>`, so a replayed conversation sends the same ids.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Any

ROUTE = "agent"


def route_of(body: dict[str, Any]) -> str | None:
    """`agent` for a tool-calling request (answered by `answer`), else None."""
    tools = body.get("tools")
    return ROUTE if isinstance(tools, list) and tools else None


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion for a request with `tools` (see the rules above)."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    prompt = next((_text(m.get("content")) for m in messages if m.get("role") == "user"), "")
    called = {
        call.get("function", {}).get("name")
        for m in messages
        if m.get("role") == "assistant"
        for call in m.get("tool_calls") or []
        if isinstance(call, dict)
    }
    turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
    tool = next((t for t in _asked_for(body, prompt) if t["name"] not in called), None)
    if tool is not None:
        call = {
            "id": f"call_{turn}_{tool['name']}",
            "type": "function",
            "function": {"name": tool["name"], "arguments": json.dumps(_arguments(tool, prompt))},
        }
        message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish, output = "tool_calls", json.dumps(call)
    else:
        results = [
            f"{_tool_name(m, messages)}: {_text(m.get('content'))}"
            for m in messages
            if m.get("role") == "tool"
        ]
        output = "\n".join(["Done.", *results])
        message, finish = {"role": "assistant", "content": output}, "stop"
    text_in = "\n".join(_text(m.get("content")) for m in messages)
    prompt_tokens, completion_tokens = _tokens(text_in), _tokens(output)
    return {
        "id": f"demo-{hashlib.sha1(text_in.encode()).hexdigest()[:12]}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "demo"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _asked_for(body: dict[str, Any], prompt: str) -> list[dict[str, Any]]:
    functions = [t.get("function") for t in body.get("tools") or [] if isinstance(t, dict)]
    return [f for f in functions if isinstance(f, dict) and f.get("name") and f["name"] in prompt]


def _arguments(tool: dict[str, Any], prompt: str) -> dict[str, Any]:
    properties = (tool.get("parameters") or {}).get("properties") or {}
    arguments: dict[str, Any] = {}
    for name, schema in properties.items():
        found = re.search(rf"\b{re.escape(name)}=([^\n]*)", prompt)
        given = found.group(1).strip() if found else None
        if (schema or {}).get("type") in ("integer", "number"):
            number = re.match(r"-?\d+(\.\d+)?", given or "")
            value: Any = float(number.group()) if number else 0
            arguments[name] = int(value) if schema.get("type") == "integer" else value
        else:
            arguments[name] = given if given is not None else prompt
    return arguments


def _tool_name(result: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    for m in messages:
        for call in m.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == result.get("tool_call_id"):
                return str(call.get("function", {}).get("name"))
    return "tool"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: [{"type": "text", "text": ...}]
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))  # four characters a token, as the other model routes
