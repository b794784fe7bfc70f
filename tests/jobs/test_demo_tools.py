"""The demo model's tool-calling rules (jobs/demo/tools.py): one tool a turn, named in the prompt,
arguments from `name=` lines; text with the results once every named tool was called."""

from __future__ import annotations

import json

from jobs.demo.services import DemoRequest, DemoServices

TOOLS = [
    {
        "type": "function",
        "function": {"name": "weather", "parameters": {"properties": {"city": {"type": "string"}}}},
    },
    {
        "type": "function",
        "function": {"name": "stock", "parameters": {"properties": {"count": {"type": "integer"}}}},
    },
    {"type": "function", "function": {"name": "unused", "parameters": {"properties": {}}}},
]


def complete(services: DemoServices, messages: list[dict]) -> dict:
    body = json.dumps({"model": "demo", "messages": messages, "tools": TOOLS}).encode()
    answer = services.handle(DemoRequest("POST", "/v1/chat/completions", body=body))
    assert answer.status == 200
    return json.loads(answer.body)["choices"][0]


def test_each_turn_calls_the_next_named_tool_then_answers_with_the_results():
    services = DemoServices()
    user = {"role": "user", "content": "Ask stock and weather.\ncity=Paris\ncount=3 please"}
    first = complete(services, [user])
    assert first["finish_reason"] == "tool_calls"
    (call,) = first["message"]["tool_calls"]
    assert call["id"] == "call_1_weather"  # the order of the request's tools, not of the prompt
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris"}

    after_first = [user, first["message"], {"role": "tool", "tool_call_id": call["id"], "content": "sunny"}]
    second = complete(services, after_first)
    (call2,) = second["message"]["tool_calls"]
    assert (call2["function"]["name"], json.loads(call2["function"]["arguments"])) == ("stock", {"count": 3})

    done = complete(
        services,
        [*after_first, second["message"], {"role": "tool", "tool_call_id": call2["id"], "content": "3 left"}],
    )
    assert done["finish_reason"] == "stop"
    assert done["message"]["content"] == "Done.\nweather: sunny\nstock: 3 left"
    assert services.calls == {"agent": 3}  # its own route: the extract/summarize counts are untouched


def test_a_prompt_naming_no_tool_is_answered_with_text():
    services = DemoServices()
    choice = complete(services, [{"role": "user", "content": "hello"}])
    assert choice["message"] == {"role": "assistant", "content": "Done."}
