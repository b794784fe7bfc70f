"""Traces of durable runs (workflows.telemetry.tracing), over the real store: the producer
span of a start or a send, one span per execution continuing it, one per step attempt with its
recorded times, waits as events, GenAI attributes, and never a span for a replayed entry. The
context's trip through the real database is in tests/integration/test_trace_context_on_db.py.

Each test traces with a TracerProvider of its own (`use_tracer_provider`, and the observer's
`tracer_provider`): the global provider is never set, so no other test is traced."""

from __future__ import annotations

import pytest
from opentelemetry import context, trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, StatusCode

from tests.tracing_support import Traced, tracing
from workflows import queue, setup, workflow
from workflows.telemetry.tracing import gen_ai_attributes, ns, producer_span, trace_id
from workflows.testing import arun_until_idle

from .test_store_failures import Blink, quick_store_retries  # noqa: F401 - the fixture, used here too


@pytest.fixture
def traced():
    yield from tracing()


async def _run(h, reg, traced: Traced) -> None:
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[traced.observer])


def _flaky_two_steps(calls: list[int]):
    async def body(ctx):
        await ctx.step("a", lambda s: 1)

        async def flaky(step):
            calls.append(step.attempt)
            if step.attempt == 1:
                raise ConnectionError("CRM said 503 with token=secret")
            return step.attempt

        await ctx.sleep("pause", 5)
        return await ctx.step("b", flaky, retry_backoff_base=2.0)

    return setup(use={"wf": workflow(body)})


async def test_a_run_is_a_tree__producer__executions__step_attempts_with_their_recorded_times(h, traced):
    calls: list[int] = []
    reg = _flaky_two_steps(calls)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    run = await handle.ainfo()
    assert set(run.trace_context) == {"traceparent"}  # stored with the run
    await _run(h, reg, traced)
    assert (await handle.ainfo()).status == "completed" and calls == [1, 2]

    [producer] = traced.named("start ")
    executions = traced.named("workflow ")
    steps = traced.named("step ")
    assert producer.name == "start wf" and producer.kind == SpanKind.PRODUCER
    assert producer.attributes["workflows.run.id"] == handle.run_id
    assert producer.attributes["workflows.run.created"] is True
    assert run.trace_context["traceparent"].split("-")[2] == format(producer.context.span_id, "016x")

    # Three executions (the sleep, then b's retry backoff, suspend the run), each a child of the
    # producer, in its trace; each step attempt a child of the execution that ran it.
    assert len(executions) == 3
    tid = producer.context.trace_id
    assert {s.context.trace_id for s in traced.spans()} == {tid}
    assert all(e.parent.span_id == producer.context.span_id for e in executions)
    assert all(e.kind == SpanKind.CONSUMER for e in executions)
    by_span = {e.context.span_id: e for e in executions}
    tree = [(by_span[s.parent.span_id].attributes["workflows.execution.fresh"], s.name,
             s.attributes["workflows.step.attempt"]) for s in steps]  # fmt: skip
    assert sorted(tree, key=lambda t: (t[1], t[2])) == [
        (True, "step a", 1),
        (False, "step b", 1),
        (False, "step b", 2),
    ]
    assert len({s.parent.span_id for s in steps if s.name == "step b"}) == 2  # a retry: two executions

    first_b, second_b = sorted(
        (s for s in steps if s.name == "step b"), key=lambda s: s.attributes["workflows.step.attempt"]
    )
    assert first_b.status.status_code == StatusCode.ERROR
    assert first_b.attributes["workflows.step.outcome"] == "error"
    assert first_b.attributes["error.type"] == "ConnectionError"
    assert first_b.attributes["workflows.step.retry_delay"] == 4.0  # base 2 s * 2**1
    assert "secret" not in str(first_b.status.description) and not first_b.events  # no messages
    assert second_b.status.status_code == StatusCode.UNSET
    assert second_b.attributes["workflows.step.outcome"] == "ok"
    assert "error.type" not in second_b.attributes

    recorded = {(a.number): a for a in h.attempts(handle.run_id, "b")}
    assert (first_b.start_time, first_b.end_time) == (ns(recorded[1].started_at), ns(recorded[1].finished_at))
    assert (second_b.start_time, second_b.end_time) == (
        ns(recorded[2].started_at),
        ns(recorded[2].finished_at),
    )

    first = next(e for e in executions if e.attributes["workflows.execution.fresh"])
    assert first.attributes["workflows.workflow.name"] == "wf"
    assert first.attributes["workflows.run.id"] == handle.run_id
    assert first.attributes["workflows.run.key"] == '["k"]'
    assert first.attributes["workflows.execution.outcome"] == "waiting"
    [wait] = first.events  # the sleep, as an event of the execution that entered it
    assert wait.name == "wait" and wait.attributes["workflows.wait.name"] == "pause"
    assert wait.attributes["workflows.wait.kind"] == "sleep"
    last = max(executions, key=lambda e: e.start_time)
    assert last.attributes["workflows.execution.outcome"] == "completed"
    assert last.attributes["workflows.run.status"] == "completed"
    assert all(
        e.end_time >= s.end_time for s in steps for e in executions if s.parent.span_id == e.context.span_id
    )


async def test_an_execution_cut_off_mid_way_and_resumed_makes_no_duplicate_step_spans(h, traced):
    ran: list[str] = []

    async def body(ctx):
        async def first(step):
            ran.append("first")
            return 1

        async def second(step):
            ran.append("second")
            return 2

        return await ctx.step("first", first) + await ctx.step("second", second)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    # The store fails as "second" records: the execution is abandoned there; the next one
    # replays "first" (no span) and runs "second" again.
    blink = Blink(
        h.store, "commit", when=lambda kw: any(w.name == "second" for w, _a in kw["commit"].entries)
    )
    await _run(h, reg, traced)

    assert blink.failed == 1 and ran == ["first", "second", "second"]
    assert (await handle.ainfo()).status == "completed"
    executions = sorted(traced.named("workflow "), key=lambda s: s.start_time)
    assert [e.attributes["workflows.execution.outcome"] for e in executions] == ["abandoned", "completed"]
    assert executions[0].status.status_code == StatusCode.ERROR
    assert executions[1].attributes["workflows.execution.taken_over"] is True
    steps = traced.named("step ")
    assert [(s.name, s.parent.span_id) for s in steps] == [
        ("step first", executions[0].context.span_id),
        ("step second", executions[1].context.span_id),
    ]  # the replayed "first" and the attempt that never landed make no span


async def test_a_queue_wait_is_an_event_and_the_consuming_execution_links_the_senders_span(h, traced):
    async def body(ctx):
        msg = await ctx.queue.next("wait-go", names=["go"])
        return msg.body

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await _run(h, reg, traced)
    message = await handle.asend("go", {"n": 1})
    assert set(message.trace_context) == {"traceparent"}
    assert (await h.store.aget_message(message.id)).trace_context == message.trace_context
    await _run(h, reg, traced)
    assert (await handle.ainfo()).status == "completed"

    [send] = traced.named("send ")
    assert send.name == "send wf.go" and send.kind == SpanKind.PRODUCER
    assert (
        send.attributes["workflows.queue"] == "go" and send.attributes["workflows.message.id"] == message.id
    )
    waiting, consuming = sorted(traced.named("workflow "), key=lambda s: s.start_time)
    assert [e.name for e in waiting.events] == ["wait"]
    assert waiting.events[0].attributes["workflows.wait.kind"] == "queue"
    assert [e.name for e in consuming.events] == ["wait done"]
    assert consuming.events[0].attributes["workflows.wait.messages"] == 1
    assert [link.context.span_id for link in consuming.links] == [send.context.span_id]


async def test_a_failed_run_ends_its_execution_span_with_error_and_the_error_type(h, traced):
    async def body(ctx):
        async def broken(step):
            raise ValueError("bad input: password=hunter2")

        return await ctx.step("broken", broken, max_retries=0)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await _run(h, reg, traced)
    assert (await handle.ainfo()).status == "failed"
    [execution] = traced.named("workflow ")
    assert execution.status.status_code == StatusCode.ERROR
    assert execution.attributes["workflows.execution.outcome"] == "failed"
    assert execution.attributes["error.type"]
    assert "hunter2" not in repr(dict(execution.attributes)) + str(execution.status.description)
    [step] = traced.named("step ")
    assert step.attributes["error.type"] == "ValueError"


async def test_a_model_step_carries_the_gen_ai_attributes_it_recorded(h, traced):
    async def body(ctx):
        async def summarize(step):
            step.meta["usage"] = {"prompt_tokens": 812, "completion_tokens": 96, "total_tokens": 908}
            step.meta["gen_ai"] = {
                "operation": "chat", "provider": "openai", "request_model": "gpt-4o-mini",
                "response_model": "gpt-4o-mini-2024-07-18",
            }  # fmt: skip
            return "brief"

        return await ctx.step("summarize", summarize)

    reg = setup(use={"wf": workflow(body)})
    await h.client(reg, "wf").aget_or_create(["k"])
    await _run(h, reg, traced)
    [step] = traced.named("step ")
    assert {k: v for k, v in step.attributes.items() if k.startswith("gen_ai.")} == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.system": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.usage.input_tokens": 812,
        "gen_ai.usage.output_tokens": 96,
    }


def test_gen_ai_attributes__from_either_shape__and_nothing_for_other_steps():
    assert gen_ai_attributes(None) == {} and gen_ai_attributes({"rows": 3}) == {}
    assert gen_ai_attributes({"usage": {"input_tokens": 5, "output_tokens": 7}}) == {
        "gen_ai.operation.name": "chat", "gen_ai.usage.input_tokens": 5, "gen_ai.usage.output_tokens": 7,
    }  # fmt: skip
    # gen_ai's own counts win; bad values are left out rather than guessed
    got = gen_ai_attributes(
        {
            "gen_ai": {"operation": "embeddings", "input_tokens": 9, "provider": 3},
            "usage": {"prompt_tokens": 1, "completion_tokens": -1},
        }
    )
    assert got == {"gen_ai.operation.name": "embeddings", "gen_ai.usage.input_tokens": 9}


async def test_with_no_sdk_nothing_is_stored_and_no_span_is_made(h):
    # No provider of the test's, and the global one is never set in this process: the API's no-op.
    assert not isinstance(trace.get_tracer_provider(), TracerProvider)

    async def body(ctx):
        return await ctx.queue.next("w", names=["go"])

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    message = await handle.asend("go", {})
    assert (await handle.ainfo()).trace_context is None
    assert message.trace_context is None and (await h.store.aget_message(message.id)).trace_context is None
    with producer_span("start", "wf") as producer:
        assert producer.carrier is None and not producer.span.is_recording()


def test_with_no_sdk_a_start_still_carries_its_callers_context():
    """A caller whose context came in from elsewhere (a traced upstream, no SDK here): the new
    run keeps that context, as the API's no-op span would have passed it on."""
    upstream = trace.SpanContext(
        trace_id=0x0AF7651916CD43DD8448EB211C80319C, span_id=0xB7AD6B7169203331, is_remote=True,
        trace_flags=trace.TraceFlags(1),
    )  # fmt: skip
    token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(upstream)))
    try:
        with producer_span("start", "wf") as producer:
            carrier = producer.carrier
    finally:
        context.detach(token)
    assert carrier == {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


async def test_a_start_that_finds_the_run_keeps_the_first_context(h, traced):
    async def body(ctx):
        return None

    reg = setup(use={"wf": workflow(body)})
    first = await h.client(reg, "wf").aget_or_create(["k"])
    again = await h.client(reg, "wf").aget_or_create(["k"])
    assert again.run_id == first.run_id and not again.created
    created, found = traced.named("start ")
    assert found.attributes["workflows.run.created"] is False
    stored = (await first.ainfo()).trace_context
    assert stored["traceparent"].split("-")[2] == format(created.context.span_id, "016x")


def test_trace_id_reads_a_stored_carrier():
    carrier = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    assert trace_id(carrier) == "0af7651916cd43dd8448eb211c80319c"
    assert trace_id(None) is None and trace_id({}) is None and trace_id({"traceparent": "junk"}) is None
    assert trace_id(["not", "a", "carrier"]) is None  # type: ignore[arg-type]


async def test_a_refused_send_ends_its_span_with_the_error_type_and_stores_nothing(h, traced):
    async def body(ctx):
        return await ctx.queue.next("w", names=["go"])

    reg = setup(use={"wf": workflow(body, queues={"go": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    with pytest.raises(Exception) as refused:
        await handle.asend("nope", {"password": "hunter2"})
    [send] = traced.named("send ")
    assert send.status.status_code == StatusCode.ERROR
    assert send.attributes["error.type"] == type(refused.value).__name__
    assert not send.events and "hunter2" not in str(send.status.description)
    assert await h.store.aavailable_messages(handle.run_id, None, 10) == []
