"""A replay from a wait delivers again what the superseded waits consumed: the same message rows
made unconsumed (no copy), in their original order, ahead of messages sent since; with
`redeliver=False` they stay consumed and the replayed wait waits for a new one. On SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest

from workflows import queue, setup, workflow
from workflows.core.records import Audit
from workflows.models import AuditEntry, Entry, Message

pytestmark = pytest.mark.asyncio


async def body(ctx):
    first = await ctx.queue.next("first", names=["q"])
    await ctx.queue.next("gate", names=["go"])
    second = await ctx.queue.next("second", names=["q"])
    return [first.body, second.body]


REGISTRY = setup(use={"wf": workflow(body, queues={"q": queue(), "go": queue()})})


def current(run_id: str, name: str) -> Entry:
    return Entry.objects.get(run_id=run_id, name=name, superseded=False)


async def test_replay_from_a_wait__the_consumed_message_comes_back_first_and_is_not_copied(h):
    handle = await h.client(REGISTRY, "wf").aget_or_create(["k"])
    one = await handle.asend("q", "one")
    await h.run(REGISTRY)  # "first" took "one"; the run waits at the gate
    two = await handle.asend("q", "two")  # sent before the replay, still pending
    first = current(handle.run_id, "first")

    await h.store.areplay(handle.run_id, first.id, audit=Audit(actor="op", reason="again"), now=h.clock.now())
    await handle.asend("go", None)
    await h.run(REGISTRY)

    info = await handle.ainfo()
    assert info.status == "completed"
    assert info.result == ["one", "two"]  # a copy sent again would come after "two"
    assert Message.objects.filter(run_id=handle.run_id, queue="q").count() == 2  # the same rows
    assert Message.objects.get(id=one.id).consumed_by_id == current(handle.run_id, "first").id != first.id
    assert Message.objects.get(id=two.id).consumed_by_id == current(handle.run_id, "second").id
    audit = AuditEntry.objects.get(run_id=handle.run_id, action="replay")
    assert audit.details["redelivered"] == [{"id": one.id, "queue": "q"}]


async def test_replay_waiting_for_new__the_replayed_wait_waits_and_a_new_message_resumes_it(h):
    handle = await h.client(REGISTRY, "wf").aget_or_create(["k"])
    one = await handle.asend("q", "one")
    await h.run(REGISTRY)
    first = current(handle.run_id, "first")

    await h.store.areplay(
        handle.run_id, first.id, audit=Audit(actor="op"), now=h.clock.now(), redeliver=False
    )
    await h.run(REGISTRY)

    assert (await handle.ainfo()).status == "waiting"
    assert Message.objects.get(id=one.id).consumed_by_id == first.id  # kept with the history
    assert not Entry.objects.filter(run_id=handle.run_id, name="first", superseded=False, status="completed")
    audit = AuditEntry.objects.get(run_id=handle.run_id, action="replay")
    assert audit.details["redelivered"] == []
    assert audit.details["not_redelivered"] == [{"id": one.id, "queue": "q"}]

    await handle.asend("q", "new")
    await handle.asend("go", None)
    await handle.asend("q", "last")
    await h.run(REGISTRY)
    assert (await handle.ainfo()).result == ["new", "last"]
