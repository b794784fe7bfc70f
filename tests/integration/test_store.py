"""The Django store's own guarantees: fencing, claims, lease lapse, atomic commits, bad input."""

from __future__ import annotations

import datetime as dt
import threading

import pydantic
import pytest
from django.db import connection, connections
from django.test.utils import CaptureQueriesContext

from tests.support import now
from workflows import queue, setup, workflow
from workflows.core.clock import FakeClock
from workflows.core.exceptions import InvalidKey, InvalidMessage, LeaseLost, UnknownQueue, UnknownWorkflow
from workflows.core.new_run import NewRun
from workflows.core.records import AttemptWrite, Commit, EntryWrite
from workflows.engine.client import WorkflowClient
from workflows.engine.runner import Runner
from workflows.models import Entry, Event, Message, Run
from workflows.storage.django import DjangoStore, paths, resumes
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


class Start(pydantic.BaseModel):
    title: str
    transcript: str


async def _wait_start(ctx):
    msg = await ctx.queue.next("wait", names=["start"])
    await ctx.step("use", lambda s: msg.body["title"])
    return msg.body["title"]


registry = setup(use={"wf": workflow(_wait_start, queues={"start": queue(Start)})})


def make_run(key="k", workflow="wf"):
    return DjangoStore().get_or_create_run(
        NewRun(workflow=workflow, key=[key], version="v", initial_state={}, now=now())
    )[0]


def test_commit__fenced_by_lease_and_atomic():
    store = DjangoStore()
    run = make_run()
    [claimed] = store.claim(owner="a", workflows=["wf"], limit=5, lease_seconds=30, now=now())
    assert claimed.id == run.id and claimed.status == "running"
    entry = EntryWrite(
        id=None, scope="", position=0, name="s", kind="step", status="completed", output=1, attempts=1
    )
    attempt = AttemptWrite(number=1, started_at=now(), finished_at=now(), outcome="ok")
    with pytest.raises(LeaseLost):
        store.commit(run_id=run.id, owner="b", commit=Commit(entries=[(entry, attempt)]), now=now())
    assert Entry.objects.count() == 0
    result = store.commit(
        run_id=run.id,
        owner="a",
        commit=Commit(entries=[(entry, attempt)], state={"x": 1}, events=[("progress", {"n": 1})]),
        now=now(),
    )
    assert result.entry_ids == [Entry.objects.get().id]
    assert Run.objects.get(id=run.id).state == {"x": 1}
    assert Event.objects.get().payload == {"n": 1}


def test_commit__a_failure_inside_writes_nothing():
    store = DjangoStore()
    run = make_run()
    store.claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    first = EntryWrite(id=None, scope="", position=0, name="s", kind="step", status="completed", attempts=1)
    clash = EntryWrite(id=None, scope="", position=0, name="t", kind="step", status="completed", attempts=1)
    with pytest.raises(Exception):  # noqa: B017 - the unique position constraint, whatever the backend calls it
        store.commit(
            run_id=run.id,
            owner="a",
            commit=Commit(entries=[(first, None), (clash, None)], state={"y": 2}),
            now=now(),
        )
    assert Entry.objects.count() == 0
    assert Run.objects.get(id=run.id).state == {}


def test_claim__only_due_runs_of_known_workflows_and_never_twice():
    store = DjangoStore()
    a, b = make_run("a"), make_run("b")
    Run.objects.filter(id=b.id).update(wake_at=now() + dt.timedelta(hours=1))
    assert store.claim(owner="x", workflows=["other"], limit=5, lease_seconds=30, now=now()) == []
    claimed = store.claim(owner="x", workflows=["wf"], limit=5, lease_seconds=30, now=now())
    assert [r.id for r in claimed] == [a.id]
    assert store.claim(owner="y", workflows=["wf"], limit=5, lease_seconds=30, now=now()) == []


def test_claim__a_lapsed_lease_is_taken_over_and_the_old_owner_is_fenced():
    store = DjangoStore()
    run = make_run()
    store.claim(owner="dead", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    Run.objects.filter(id=run.id).update(wake_at=now() - dt.timedelta(seconds=1))  # age the lease
    [taken] = store.claim(owner="alive", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    assert taken.id == run.id and Run.objects.get(id=run.id).lease_owner == "alive"
    with pytest.raises(LeaseLost):
        store.commit(run_id=run.id, owner="dead", commit=Commit(state={"late": True}), now=now())


def test_heartbeat__extends_only_held_leases_and_reports_cancel():
    store = DjangoStore()
    run = make_run()
    store.claim(owner="a", workflows=["wf"], limit=1, lease_seconds=1, now=now())
    store.request_cancel(run.id, now=now())
    held = store.heartbeat(owner="a", run_ids=[run.id], lease_seconds=60, now=now())
    assert held == {run.id: True}
    assert Run.objects.get(id=run.id).wake_at > now() + dt.timedelta(seconds=50)
    assert store.heartbeat(owner="b", run_ids=[run.id], lease_seconds=60, now=now()) == {}


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("workflows", [["wf"], ["wf", "wf2", "wf3"]], ids=["one workflow", "three"])
def test_claim__concurrent_claimers_never_share_a_run(workflows):
    for i in range(40):
        make_run(f"r{i}", workflows[i % len(workflows)])
    results: dict[str, list[str]] = {}

    def claim(owner):
        got = []
        try:
            store = DjangoStore()
            while True:
                batch = store.claim(owner=owner, workflows=workflows, limit=3, lease_seconds=30, now=now())
                if not batch:
                    break
                got += [r.id for r in batch]
        finally:
            connections.close_all()
        results[owner] = got

    threads = [threading.Thread(target=claim, args=(f"o{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    every = [rid for got in results.values() for rid in got]
    assert len(every) == 40 and len(set(every)) == 40
    assert set(Run.objects.values_list("lease_owner", flat=True)) <= set(results)


def test_bad_input__changes_nothing():
    client = WorkflowClient(registry, "wf", store=DjangoStore())
    with pytest.raises(UnknownWorkflow):
        registry.client("nope")
    for bad in ("k", [1], [], {"a": 1}):
        with pytest.raises(InvalidKey):
            client.get_or_create(bad)
    assert Run.objects.count() == 0
    handle = client.get_or_create(["k"])
    with pytest.raises(UnknownQueue):
        handle.send("nope", {})
    with pytest.raises(InvalidMessage) as caught:
        handle.send("start", {"title": "t"})
    assert "transcript" in str(caught.value)
    assert Message.objects.count() == 0


def test_run_until_idle__works_inside_a_test_transaction():
    client = registry.client("wf")
    client.store = DjangoStore()
    handle = client.get_or_create(["job-1"])
    handle.send("start", {"title": "Q3", "transcript": "..."})
    run_until_idle(registry, clock=FakeClock(now()))
    run = handle.info()
    assert (run.status, run.result) == ("completed", "Q3")


@pytest.mark.django_db(transaction=True)
def test_send_wait__returns_the_runs_response():
    async def approver(ctx):
        msg = await ctx.queue.next("wait", names=["approve"], completable=True)
        await msg.complete({"approved": msg.body["ok"]})

    reg = setup(use={"approver": workflow(approver, queues={"approve": queue()})})
    handle = reg.client("approver").get_or_create(["a1"])
    stop = threading.Event()

    def serve():
        import asyncio

        async def main():
            runner = Runner(registry=reg, store=DjangoStore(), watch=True, heartbeat_seconds=1)
            task = asyncio.create_task(runner.run())
            await asyncio.to_thread(stop.wait)
            runner.request_stop()
            await task

        try:
            asyncio.run(main())
        finally:
            connections.close_all()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        assert handle.send("approve", {"ok": True}, wait=True, timeout=20) == {"approved": True}
    finally:
        stop.set()
        thread.join(20)
    assert handle.info().status == "completed"


def test_events__cursor_reads_in_order():
    store = DjangoStore()
    run = make_run()
    store.claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    store.commit(run_id=run.id, owner="a", commit=Commit(events=[("e", i) for i in range(5)]), now=now())
    events = store.list_events(run.id)
    assert [e.payload for e in events] == [0, 1, 2, 3, 4]
    assert [e.payload for e in store.list_events(run.id, after=events[1].id)] == [2, 3, 4]


def test_vendor_is_what_database_url_says():
    import os

    expected = "postgresql" if os.environ.get("DATABASE_URL", "").startswith("postgres") else "sqlite"
    assert connection.vendor == expected


def test_history_and_messages_read_back_every_value_as_written():
    """load_history and available_messages read raw rows: each JSON value comes back as the value
    written (a JSON string stays a string, null stays None), times come back aware UTC."""
    store = DjangoStore()
    run = make_run("raw-reads")
    [claimed] = store.claim(owner="a", workflows=["wf"], limit=5, lease_seconds=30, now=now())
    values = ["7", None, {"a": [1, "x", None]}, 'é\u2028"quoted"', 0, "null", [], 2.5]
    started = now()
    entries = [
        (
            EntryWrite(
                id=None, scope="", position=i, name=f"s{i}", kind="step", status="completed",
                input=value, output=value, meta={"usage": {"tokens": i}}, attempts=1,
                started_at=started, finished_at=started,
            ),
            None,
        )
        for i, value in enumerate(values)
    ]  # fmt: skip
    store.commit(run_id=claimed.id, owner="a", commit=Commit(entries=entries), now=now())
    history = store.load_history(run.id)
    assert [e.output for e in history] == values
    assert [e.input for e in history] == values
    assert history[2].meta == {"usage": {"tokens": 2}}
    assert history[0].started_at == started and history[0].started_at.tzinfo is not None
    assert history[0].wake_at is None and history[0].error is None

    client = WorkflowClient(registry, "wf", store=store)
    client.get_by_id(run.id).send("start", {"title": "é", "transcript": "null"})
    [message] = store.available_messages(run.id, ["start"], 10)
    assert message.body == {"title": "é", "transcript": "null"} and message.run_id == run.id
    assert message.sent_at.tzinfo is not None and message.consumed_at is None
    assert store.available_messages(run.id, ["other"], 10) == []
    assert store.available_messages(run.id, None, 10) == [message]


def _taking(position: int, message_ids: list[int], completes: bool) -> Commit:
    entry = EntryWrite(
        id=None, scope="", position=position, name=f"wait{position}", kind="queue", status="completed",
        output={"messages": []}, consumes=message_ids, started_at=now(), finished_at=now(),
    )  # fmt: skip
    return Commit(entries=[(entry, None)], complete=[(m, None) for m in message_ids] if completes else [])


@pytest.mark.parametrize("completes", [False, True])
def test_a_wait_takes_its_messages_in_its_commit_or_writes_nothing(completes):
    """A wait's commit (one statement on PostgreSQL) consumes the messages it took, by its entry,
    and completes them when the wait answers none; if one of them was taken already, the whole
    commit is refused (LeaseLost) and nothing of it is written."""
    store = DjangoStore()
    run = make_run("takes")
    handle = WorkflowClient(registry, "wf", store=store).get_by_id(run.id)
    first = handle.send("start", {"title": "a", "transcript": "t"})
    second = handle.send("start", {"title": "b", "transcript": "t"})
    [claimed] = store.claim(owner="a", workflows=["wf"], limit=5, lease_seconds=30, now=now())

    with CaptureQueriesContext(connection) as statements:
        result = store.commit(
            run_id=claimed.id, owner="a", commit=_taking(0, [first.id], completes), now=now()
        )
    if connection.vendor == "postgresql":
        assert len(statements) == 1  # one round trip, no transaction block around it
    taken = Message.objects.get(id=first.id)
    assert taken.consumed_at is not None and taken.consumed_by_id == result.entry_ids[0]
    assert (taken.completed_at is not None) is completes
    assert [m.id for m in store.available_messages(run.id, None, 10)] == [second.id]

    entries = Entry.objects.count()
    with pytest.raises(LeaseLost):  # the first was taken already: the second is not taken either
        store.commit(
            run_id=claimed.id, owner="a", commit=_taking(1, [first.id, second.id], completes), now=now()
        )
    assert Entry.objects.count() == entries
    assert Message.objects.get(id=second.id).consumed_at is None


def test_a_resumed_run_reads_its_history_and_waiting_messages_in_one_go():
    """PostgreSQL reads the unconsumed messages with the history (one round trip); SQLite leaves
    them to the wait (None). More than RESUME_MESSAGES: not read with it either."""
    store = DjangoStore()
    run = make_run("resume")
    handle = WorkflowClient(registry, "wf", store=store).get_by_id(run.id)
    sent = [handle.send("start", {"title": str(i), "transcript": "t"}) for i in range(3)]
    [claimed] = store.claim(owner="a", workflows=["wf"], limit=5, lease_seconds=30, now=now())
    store.commit(run_id=claimed.id, owner="a", commit=_taking(0, [sent[0].id], completes=False), now=now())

    history, messages = store.load_resume(run.id)
    assert history == store.load_history(run.id)
    if connection.vendor == "postgresql":
        assert messages == store.available_messages(run.id, None, 10)
        assert [m.id for m in messages] == [sent[1].id, sent[2].id]
        for i in range(resumes.RESUME_MESSAGES):
            handle.send("start", {"title": f"more {i}", "transcript": "t"})
        assert store.load_resume(run.id)[1] is None
    else:
        assert messages is None


def test_a_message_that_arrives_after_the_resume_read_still_reaches_the_wait(monkeypatch):
    """The resume read is a snapshot: a message sent just after it is not in it. The wait then
    suspends, and the suspension, finding the message there, wakes the run again."""
    store = DjangoStore()
    clock = FakeClock(now())
    handle = WorkflowClient(registry, "wf", store=store, clock=clock).get_or_create(["late"])
    run_until_idle(registry, store=store, clock=clock)
    assert handle.info().status == "waiting"
    handle.send("start", {"title": "late", "transcript": "t"})
    real = store.load_resume
    stale = [True]

    def read_before_the_message(run_id):
        history, messages = real(run_id)
        if stale.pop() if stale else False:
            return history, []  # as read an instant before the message was stored
        return history, messages

    monkeypatch.setattr(store, "load_resume", read_before_the_message)
    run_until_idle(registry, store=store, clock=clock)
    info = handle.info()
    assert (info.status, info.result) == ("completed", "late")
    assert not stale  # the stale read did happen


def test_without_pipelines_a_resumed_run_reads_its_messages_when_it_waits(monkeypatch):
    """A libpq older than 14 cannot pipeline: the history alone, as on SQLite."""
    monkeypatch.setattr(paths, "pipelines", lambda: False)
    store = DjangoStore()
    run = make_run("no-pipeline")
    history, messages = store.load_resume(run.id)
    assert history == [] and messages is None
