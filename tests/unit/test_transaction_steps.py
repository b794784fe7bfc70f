"""Transaction steps (`ctx.transaction`) over the real store on the test database: the body's ORM
writes and the step's record commit together or not at all, and a recorded one never runs again."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import connections

from jobs.models import PublishedBrief
from workflows import CriticalError, queue, setup, workflow
from workflows.core.exceptions import BadInput
from workflows.engine.execution import Execution
from workflows.models import Message


def one(fn, **kw):
    return setup(use={"wf": workflow(fn, **kw)})


def record(url: str):
    """A transaction body that writes one row and returns its id."""

    def fn(step):
        row = PublishedBrief.objects.create(
            job_id=step.key[0], run_id=step.run_id, url=url, title="t",
            published_at=dt.datetime.now(dt.UTC), step_key=f"{step.idempotency_key}",
        )  # fmt: skip
        return {"row": row.id, "attempt": step.attempt}

    return fn


async def test_writes_and_record_commit_together(h):
    async def body(ctx):
        return await ctx.transaction("record", record("https://cms/1"), input={"url": "https://cms/1"})

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    [row] = PublishedBrief.objects.all()
    assert run.status == "completed" and run.result == {"row": row.id, "attempt": 1}
    entry = h.entries(handle.run_id)["record"]
    assert (entry.kind, entry.status, entry.meta) == ("step", "completed", {"transaction": True})
    assert entry.input == {"url": "https://cms/1"} and entry.output == run.result
    assert [a.outcome for a in h.attempts(handle.run_id, "record")] == ["ok"]


async def test_an_exception_in_fn_leaves_no_row_and_retries(h):
    def flaky(step):
        record(f"https://cms/{step.attempt}")(step)  # written, then rolled back with the attempt
        if step.attempt == 1:
            raise RuntimeError("the CMS answer was not what we expected")
        return step.attempt

    async def body(ctx):
        return await ctx.transaction("record", flaky, retry_backoff_base=0.01)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).result == 2
    assert list(PublishedBrief.objects.values_list("url", flat=True)) == ["https://cms/2"]
    attempts = h.attempts(handle.run_id, "record")
    assert [a.outcome for a in attempts] == ["error", "ok"]
    assert attempts[0].error["name"] == "RuntimeError"
    assert "not what we expected" in attempts[0].error["message"]


async def test_out_of_retries__step_fails_and_nothing_of_it_stays(h):
    def failing(step):
        record(f"https://cms/{step.attempt}")(step)
        raise RuntimeError("no")

    async def body(ctx):
        return await ctx.transaction("record", failing, max_retries=1, retry_backoff_base=0.01)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "failed" and not PublishedBrief.objects.exists()
    assert h.entries(handle.run_id)["record"].error["kind"] == "exhausted"
    assert [a.outcome for a in h.attempts(handle.run_id, "record")] == ["error", "error"]


async def test_replay_returns_the_recorded_value_without_running_fn(h):
    calls = []

    def fn(step):
        calls.append(step.attempt)
        return record("https://cms/1")(step)

    async def body(ctx):
        value = await ctx.transaction("record", fn)
        msg = await ctx.queue.next("go", names=["go"])
        return [value["row"], msg.body]

    reg = one(body, queues={"go": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "waiting" and calls == [1]
    await handle.asend("go", "now")
    await h.run(reg)  # the body runs again from the top: the transaction replays
    [row] = PublishedBrief.objects.all()
    assert (await handle.ainfo()).result == [row.id, "now"]
    assert calls == [1]


async def test_critical_error_and_unrecordable_value_fail_at_once(h):
    def critical(step):
        record("https://cms/c")(step)
        raise CriticalError("bad data")

    def unrecordable(step):
        record("https://cms/u")(step)
        return {1, 2}

    async def body(ctx):
        a = await ctx.try_block("a", lambda c: c.transaction("critical", critical))
        b = await ctx.try_block("b", lambda c: c.transaction("unrecordable", unrecordable))
        return [a.failure.kind, b.failure.kind]

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).result == ["critical", "critical"]
    assert not PublishedBrief.objects.exists()


async def test_fn_may_not_write_the_state_but_may_send_messages(h):
    def writes_state(step):
        step.state["published"] = True
        return 1

    def sends(step):
        record("https://cms/m")(step)
        step.queue.send("inbox", {"published": True})
        return 2

    async def body(ctx):
        await ctx.try_block("a", lambda c: c.transaction("state", writes_state))
        return await ctx.transaction("sends", sends)

    reg = one(body, queues={"inbox": queue()})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "completed", run.error
    assert run.result == 2 and "published" not in run.state
    refused = h.entries(handle.run_id)["state"].error
    assert (refused["kind"], refused["name"]) == ("critical", "BadInput")
    assert "step.state" in refused["message"]
    assert list(Message.objects.values_list("body", flat=True)) == [{"published": True}]
    assert PublishedBrief.objects.count() == 1


async def test_async_fn_and_a_timeout_are_refused(h):
    async def fn(step):
        return 1

    async def body(ctx):
        with pytest.raises(BadInput, match="plain \\(sync\\) function"):
            await ctx.transaction("async", fn)
        with pytest.raises(BadInput, match="takes no timeout"):
            await ctx.transaction("timed", lambda s: 1, timeout=5)
        return "ok"

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).result == "ok"


@pytest.fixture
def other_alias():
    """A second database alias, as a project with two databases has one: an in-memory SQLite
    database (the test connects it itself: Django's test case refuses to open a connection to an
    alias the test did not declare, before the guard could see the query)."""
    sqlite = {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:", "OPTIONS": {}}
    connections.settings["other"] = {**connections.settings["default"], **sqlite}
    try:
        yield "other"
    finally:
        connections["other"].close()
        del connections["other"]
        del connections.settings["other"]


async def test_a_query_on_another_database_fails_the_step(h, other_alias):
    def elsewhere(step):
        record("https://cms/e")(step)
        PublishedBrief.objects.using(other_alias).create(
            job_id="k", run_id="r", url="u", title="t", published_at=dt.datetime.now(dt.UTC), step_key="x"
        )

    async def body(ctx):
        return await ctx.transaction("record", elsewhere, max_retries=1, retry_backoff_base=0.01)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    connections[other_alias].connect()
    await h.run(reg)
    assert (await handle.ainfo()).status == "failed"
    assert not PublishedBrief.objects.exists()
    attempts = h.attempts(handle.run_id, "record")
    assert [a.outcome for a in attempts] == ["error", "error"]  # retried by its policy
    assert attempts[0].error["name"] == "OtherDatabaseUsed", attempts[0].error
    assert "'default'" in attempts[0].error["message"] and "'other'" in attempts[0].error["message"]


async def test_a_lost_lease_runs_nothing_and_writes_nothing(h):
    calls = []

    def fn(step):
        calls.append(1)
        return record("https://cms/l")(step)

    async def body(ctx):
        return await ctx.transaction("record", fn)

    reg = one(body)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    [run] = h.store.claim(owner="me", workflows=["wf"], limit=1, lease_seconds=30, now=h.clock.now())
    h.steal_lease(run.id, "other")
    execution = Execution(
        run=run, definition=reg.get("wf"), registry=reg, history=[], store=h.store, clock=h.clock, owner="me"
    )
    outcome = await execution.execute()
    assert outcome.status == "lost"
    assert calls == [] and not PublishedBrief.objects.exists()
    assert h.store.load_history(handle.run_id) == []
