"""The trace context's trip through the real database (SQLite, or PostgreSQL with DATABASE_URL):
stored with the run and the message by their one-statement paths, read back by the claim so an
execution continues the trace, NULL when no SDK is configured, and tracing off costs a step no
query. The inspector's run page shows the trace id, linked with WORKFLOWS["TRACE_URL"]."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from tests.tracing_support import Traced, tracing
from workflows import conf, queue, setup, workflow
from workflows.engine.client import WorkflowClient
from workflows.models import Message, Run
from workflows.storage.django import DjangoStore, values
from workflows.testing import arun_until_idle, run_until_idle


@pytest.fixture
def traced():
    yield from tracing()


def _waiting_registry():
    async def body(ctx):
        async def fetch(step):
            return 1

        await ctx.step("fetch", fetch)
        msg = await ctx.queue.next("wait-go", names=["go"])
        return msg.body

    return setup(use={"wf": workflow(body, queues={"go": queue()})})


def _stored(column_value):
    """A JSON column as read by raw SQL: text on SQLite, decoded on PostgreSQL."""
    return json.loads(column_value) if isinstance(column_value, str) else column_value


async def test_the_context_survives_the_store__run__claim__message__link(h, traced: Traced):
    reg = _waiting_registry()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    [producer] = traced.named("start ")
    row = Run.objects.get(id=handle.run_id)
    assert row.trace_context["traceparent"].split("-")[1:3] == [
        format(producer.context.trace_id, "032x"),
        format(producer.context.span_id, "016x"),
    ]
    with connection.cursor() as cursor:  # a JSON object in the column, not a string in it
        cursor.execute("SELECT trace_context FROM workflows_run WHERE id = %s", [values.rid(handle.run_id)])
        assert _stored(cursor.fetchone()[0]) == row.trace_context

    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[traced.observer])
    message = await handle.asend("go", {"n": 1})
    assert Message.objects.get(id=message.id).trace_context == message.trace_context is not None
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[traced.observer])
    assert (await handle.ainfo()).status == "completed"

    [send] = traced.named("send ")
    executions = sorted(traced.named("workflow "), key=lambda s: s.start_time)
    assert len(executions) == 2
    # Both executions read the context back from the claim: children of the producer span.
    assert all(e.parent is not None and e.parent.span_id == producer.context.span_id for e in executions)
    assert [link.context.span_id for link in executions[1].links] == [send.context.span_id]
    [step] = traced.named("step ")
    assert step.parent.span_id == executions[0].context.span_id


async def test_a_run_a_step_creates_continues_the_trace_it_was_started_in(h, traced: Traced):
    async def child(ctx):
        msg = await ctx.queue.next("wait", names=["job"])
        return msg.body

    async def parent(ctx):
        async def hand_off(step):
            step.queue.send("job", {"n": 1}, workflow="child", key=["c1"])
            return "sent"

        return await ctx.step("hand-off", hand_off)

    reg = setup(use={"parent": workflow(parent), "child": workflow(child, queues={"job": queue()})})
    handle = await h.client(reg, "parent").aget_or_create(["p"])
    await arun_until_idle(reg, store=h.store, clock=h.clock, observers=[traced.observer])
    child_run = Run.objects.get(workflow="child")
    assert child_run.trace_context == Run.objects.get(id=handle.run_id).trace_context
    assert Message.objects.get(run=child_run).trace_context == child_run.trace_context
    [producer] = traced.named("start ")
    assert {s.context.trace_id for s in traced.spans()} == {producer.context.trace_id}


async def test_with_no_sdk_the_columns_stay_null(h):
    reg = _waiting_registry()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    await handle.asend("go", {})
    await h.run(reg)
    assert (await handle.ainfo()).status == "completed"
    assert Run.objects.filter(trace_context__isnull=True).count() == Run.objects.count() == 1
    assert Message.objects.filter(trace_context__isnull=True).count() == Message.objects.count() == 1


def test_starting_and_sending_stay_one_statement_on_postgresql_with_tracing_on(transactional_db, traced):
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement start and send are PostgreSQL's")
    reg = _waiting_registry()
    client = WorkflowClient(reg, "wf", store=DjangoStore())
    with CaptureQueriesContext(connection) as start:
        handle = client.get_or_create(["k"])
    with CaptureQueriesContext(connection) as send:
        message = handle.send("go", {"n": 1})
    assert len(start.captured_queries) == 1 and len(send.captured_queries) == 1
    assert Run.objects.get(id=handle.run_id).trace_context is not None
    assert Message.objects.get(id=message.id).trace_context is not None


def test_with_no_sdk_the_default_observers_cost_a_step_no_query(transactional_db):
    """The same run with and without the default observers (logs, traces, metrics): same queries."""

    def two_steps():
        async def body(ctx):
            async def one(step):
                return 1

            async def two(step):
                return 2

            return await ctx.step("one", one) + await ctx.step("two", two)

        return setup(use={"wf": workflow(body)})

    def queries(key: str, observers) -> int:
        reg = two_steps()
        store = DjangoStore()
        WorkflowClient(reg, "wf", store=store).get_or_create([key])
        with CaptureQueriesContext(connection) as captured:
            run_until_idle(reg, store=store, observers=observers)
        assert Run.objects.get(key_text=json.dumps([key])).status == "completed"
        return len(captured.captured_queries)

    defaults = conf.observers()
    assert {type(o).__name__ for o in defaults} == {
        "ActivityLogObserver",
        "TracingObserver",
        "MetricsObserver",
    }
    without = queries("a", [])
    assert without > 0
    assert queries("b", defaults) == without


@pytest.fixture
def staff(django_user_model, client):
    client.force_login(django_user_model.objects.create_superuser("root", "r@example.com", "pw"))
    return client


def test_the_run_page_shows_the_trace_id__linked_with_trace_url(transactional_db, staff, settings, traced):
    reg = _waiting_registry()
    handle = WorkflowClient(reg, "wf", store=DjangoStore()).get_or_create(["k"])
    [producer] = traced.named("start ")
    tid = format(producer.context.trace_id, "032x")
    page = reverse("admin:workflows_run_inspect", args=[handle.run_id])

    html = staff.get(page).content.decode()
    assert f'data-trace-id="{tid}"' in html and "tempo.example" not in html

    settings.WORKFLOWS = {**settings.WORKFLOWS, "TRACE_URL": "https://tempo.example/trace/{trace_id}"}
    html = staff.get(page).content.decode()
    assert f'href="https://tempo.example/trace/{tid}"' in html

    Run.objects.filter(id=handle.run_id).update(trace_context=None)  # a run started untraced
    assert "data-trace-id" not in staff.get(page).content.decode()
