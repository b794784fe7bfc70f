"""A pydantic-ai agent run durably: each model request and tool call is a named, recorded step;
a replay after a failure calls neither the model nor the tools again for the turns already done."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel
from pydantic_ai.usage import RequestUsage

from workflows import Limiter, setup, workflow
from workflows.contrib.pydantic_ai import DurableAgent, approval_queue
from workflows.core.exceptions import BadInput
from workflows.core.streams import text_of
from workflows.models import Entry

pytestmark = pytest.mark.django_db(transaction=True)


def scripted_model(calls: Counter, fail_on_turn: int | None = None) -> FunctionModel:
    """Turn 1 asks for both tools at once; turn 2 answers with their results."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls["model"] += 1
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            parts = [
                ToolCallPart("weather", {"city": "Paris"}, tool_call_id="c1"),
                ToolCallPart("stock", {"sku": "A-1"}, tool_call_id="c2"),
            ]
        else:
            if fail_on_turn == 2 and calls["failed"] == 0:
                calls["failed"] += 1
                raise ConnectionError("the model went away")
            parts = [TextPart("; ".join(f"{p.tool_name}={p.content}" for p in returns))]
        return ModelResponse(
            parts=parts, usage=RequestUsage(input_tokens=50, output_tokens=7), model_name="fn"
        )

    return FunctionModel(respond)


def make_agent(calls: Counter, **options) -> DurableAgent:
    agent = Agent(name="helper")

    @agent.tool_plain
    def weather(city: str) -> str:
        calls["weather"] += 1
        return f"sunny in {city}"

    @agent.tool_plain
    def stock(sku: str) -> dict:
        calls["stock"] += 1
        return {"sku": sku, "left": 3}

    return DurableAgent(agent, name="helper", **options)


def registry_for(durable: DurableAgent, model: FunctionModel, **workflow_options):
    async def body(ctx):
        result = await durable.run(ctx, "How is Paris and item A-1?", model=model)
        return result.output

    return setup(
        use={"agent": workflow(body, **workflow_options)},
        limiters=[Limiter("model", tokens_per_minute=10_000)],
    )


def names(h, run_id: str) -> list[str]:
    return [e.name for e in h.store.load_history(run_id)]


async def test_each_model_request_and_tool_call_is_a_named_step(h):
    calls = Counter()
    reg = registry_for(make_agent(calls), scripted_model(calls))
    run = await h.client(reg, "agent").aget_or_create(["r1"])
    await h.run(reg)
    info = await h.store.aget_run(run.run_id)
    assert info.status == "completed", info.error
    assert info.result == "weather=sunny in Paris; stock={'sku': 'A-1', 'left': 3}"
    assert names(h, run.run_id) == [
        "helper:turn-1:model",
        "helper:turn-1:tool:weather[0]",
        "helper:turn-1:tool:stock[1]",
        "helper:turn-2:model",
    ]
    model_entry = Entry.objects.get(run_id=run.run_id, name="helper:turn-1:model")
    assert model_entry.meta["usage"] == {"input_tokens": 50, "output_tokens": 7, "total_tokens": 57}
    assert model_entry.meta["gen_ai"]["request_model"] == model_entry.meta["gen_ai"]["response_model"]
    assert model_entry.output["parts"][0]["tool_name"] == "weather"  # the response, as JSON
    tool_entry = Entry.objects.get(run_id=run.run_id, name="helper:turn-1:tool:weather[0]")
    assert tool_entry.input == {"city": "Paris"}
    assert tool_entry.output == {"value": "sunny in Paris"}
    assert calls == Counter(model=2, weather=1, stock=1)


async def test_a_failed_turn_replays_the_turns_before_it_without_calling_again(h):
    calls = Counter()
    durable = make_agent(calls, model_step={"max_retries": 2, "retry_backoff_base": 1.0})
    reg = registry_for(durable, scripted_model(calls, fail_on_turn=2))
    run = await h.client(reg, "agent").aget_or_create(["r2"])
    await h.run(reg)
    info = await h.store.aget_run(run.run_id)
    assert info.status == "completed", info.error
    # Turn 2 failed once: the body ran again from the start, and turn 1 came from its records.
    assert calls == Counter(model=3, failed=1, weather=1, stock=1)
    assert h.attempts(run.run_id, "helper:turn-2:model")[0].outcome == "error"
    assert len(h.attempts(run.run_id, "helper:turn-1:model")) == 1


async def test_a_tool_needing_approval_waits_for_the_operator(h):
    calls = Counter()
    reg = registry_for(
        make_agent(calls, approve=["stock"]),
        scripted_model(calls),
        queues={"tool-approval": approval_queue()},
    )
    client = h.client(reg, "agent")
    run = await client.aget_or_create(["r3"])
    await h.run(reg)
    info = await h.store.aget_run(run.run_id)
    assert info.status == "waiting"
    assert info.state["pending_tool_call"] == {
        "agent": "helper",
        "wait": "helper:turn-1:approval:stock[1]",
        "tool": "stock",
        "args": {"sku": "A-1"},
    }
    assert calls == Counter(model=1, weather=1)  # stock waits
    await run.asend("tool-approval", {"decision": "deny", "by": "ops", "note": "not today"})
    await h.run(reg)
    info = await h.store.aget_run(run.run_id)
    assert info.status == "completed", info.error
    assert "stock=The tool call was denied by ops. Note: not today" in info.result
    assert info.state["pending_tool_call"] is None
    assert calls == Counter(model=2, weather=1)  # denied: stock never ran, turn 1 not asked again


async def test_an_approved_tool_runs(h):
    calls = Counter()
    reg = registry_for(
        make_agent(calls, approve=["stock"]),
        scripted_model(calls),
        queues={"tool-approval": approval_queue()},
    )
    run = await h.client(reg, "agent").aget_or_create(["r4"])
    await h.run(reg)
    await run.asend("tool-approval", {"decision": "approve", "by": "ops"})
    await h.run(reg)
    info = await h.store.aget_run(run.run_id)
    assert info.status == "completed", info.error
    assert calls == Counter(model=2, weather=1, stock=1)
    assert "helper:turn-1:approval:stock[1]" in names(h, run.run_id)


async def test_requires_approval_tools_wait_too(h):
    calls = Counter()
    agent = Agent(name="helper")
    agent.tool_plain(lambda city: f"sunny in {city}", name="weather")

    @agent.tool_plain(requires_approval=True)
    def stock(sku: str) -> str:
        calls["stock"] += 1
        return "3 left"

    reg = registry_for(
        DurableAgent(agent, name="helper"), scripted_model(calls), queues={"tool-approval": approval_queue()}
    )
    run = await h.client(reg, "agent").aget_or_create(["r5"])
    await h.run(reg)
    assert (await h.store.aget_run(run.run_id)).state["pending_tool_call"]["tool"] == "stock"
    await run.asend("tool-approval", {"decision": "approve", "by": "ops"})
    await h.run(reg)
    assert (await h.store.aget_run(run.run_id)).status == "completed"
    assert calls["stock"] == 1


async def test_the_token_limiter_sees_the_model_steps(h):
    calls = Counter()
    durable = make_agent(calls, model_step={"limit": "model"})
    reg = registry_for(durable, scripted_model(calls))
    run = await h.client(reg, "agent").aget_or_create(["r6"])
    await h.run(reg)
    assert (await h.store.aget_run(run.run_id)).status == "completed"
    entry = Entry.objects.get(run_id=run.run_id, name="helper:turn-2:model")
    assert entry.meta["usage"]["total_tokens"] == 57


def test_bad_options_are_refused_when_declared():
    with pytest.raises(BadInput, match="unknown step options"):
        DurableAgent(Agent(), name="a", model_step={"retries": 3})
    with pytest.raises(BadInput, match="needs a name"):
        DurableAgent(Agent(), name="a:b")
    with pytest.raises(BadInput, match=r"pydantic_ai\.Agent"):
        DurableAgent(object(), name="a")  # type: ignore[arg-type]


def streaming_model(calls: Counter) -> FunctionModel:
    """Streams: turn 1 a tool call, turn 2 the answer in three pieces."""

    async def stream(messages: list[ModelMessage], info: AgentInfo):
        calls["model"] += 1
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if not returns:
            yield {0: DeltaToolCall(name="weather", json_args='{"city": "Paris"}', tool_call_id="c1")}
        else:
            for piece in ("It is ", "sunny ", "in Paris"):
                yield piece

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise AssertionError("a streaming agent asks for a stream")

    return FunctionModel(respond, stream_function=stream)


async def test_a_streaming_agent_writes_each_turns_text_to_the_stream_and_records_it_whole(h):
    calls = Counter()
    reg = registry_for(make_agent(calls, stream="answer"), streaming_model(calls))
    run = await h.client(reg, "agent").aget_or_create(["r-stream"])
    await h.run(reg)
    info = await h.store.aget_run(run.run_id)
    assert info.status == "completed", info.error
    assert info.result == "It is sunny in Paris"
    chunks = [c async for c in run.stream("answer")]
    assert [(c.step, c.seq, c.data) for c in chunks] == [
        ("helper:turn-2:model", 0, "It is "), ("helper:turn-2:model", 1, "sunny "),
        ("helper:turn-2:model", 2, "in Paris"),
    ]  # fmt: skip
    assert text_of(chunks) == info.result
    recorded = Entry.objects.get(run_id=run.run_id, name="helper:turn-2:model").output
    assert [p["content"] for p in recorded["parts"]] == ["It is sunny in Paris"]
    assert calls == Counter(model=2, weather=1)
    with pytest.raises(BadInput, match="stream name"):
        DurableAgent(Agent(), name="a", stream="x" * 201)
