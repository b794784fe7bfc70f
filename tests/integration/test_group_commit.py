"""Group commit (PostgreSQL, a runner's store): step commits of several runs ready at the same time
go out as one statement; each is still fenced by its own lease, and one run's failure stays its
own. Both commit paths: on the store's async connection (the default: commits made ready in one
turn of the loop, or while a statement is in flight, share the next) and through the database
threads (`PostgresThreads`: commits queued while every thread is busy share the next)."""

from __future__ import annotations

import asyncio
import functools
import threading

import psycopg
import pytest
from django.db import IntegrityError, OperationalError, connection

from tests.support import claimed_runs, lock_waiters, now, wait_for
from workflows.core.exceptions import LeaseLost, StoreUnavailable
from workflows.core.records import AttemptWrite, Commit, EntryWrite, EventOrigin, StreamChunk, Transition
from workflows.models import Entry, Event, Run
from workflows.models import StreamChunk as StreamChunkRow
from workflows.storage.django import DjangoStore, async_commits, commit_statement, group_commit
from workflows.storage.django.loop_connectors import PostgresLoop
from workflows.storage.django.notify import _libpq_params

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the store's threads must see the rows
    pytest.mark.skipif(connection.vendor != "postgresql", reason="group commit is PostgreSQL's"),
]

THREADS = 2


def a_step(position: int, output: object = None) -> Commit:
    entry = EntryWrite(
        id=None, scope="", position=position, name=f"s{position}", kind="step", status="completed",
        output=position if output is None else output, attempts=1,
    )  # fmt: skip
    attempt = AttemptWrite(number=1, started_at=now(), finished_at=now(), outcome="ok")
    return Commit(entries=[(entry, attempt)], events=[("progress", {"at": position})], state={"at": position})


@pytest.fixture(params=["async", "threads"], autouse=True)
def path(request, settings):
    """The runner's store of each test is built with this path's connector."""
    connector = "postgres-loop" if request.param == "async" else "postgres-threads"
    settings.WORKFLOWS = {**settings.WORKFLOWS, "CONNECTOR": connector}
    return request.param


async def _commit_together(store: DjangoStore, commits: list[tuple[str, str, Commit]], at=None) -> list:
    """Make the commits ready at the same time. Async path: in one turn of the loop. Threads: hold
    every database thread, queue the commits, then let the threads go (the first one free takes
    every commit queued by then)."""
    if isinstance(store.connector, PostgresLoop):
        return await asyncio.gather(
            *[
                store.acommit(run_id=run_id, owner=owner, commit=c, now=at or now())
                for run_id, owner, c in commits
            ],
            return_exceptions=True,
        )
    release = threading.Event()
    holding = [asyncio.ensure_future(store.run_sync(release.wait, 10)) for _ in range(THREADS)]
    await asyncio.sleep(0.05)
    tasks = [
        asyncio.ensure_future(store.acommit(run_id=run_id, owner=owner, commit=commit, now=at or now()))
        for run_id, owner, commit in commits
    ]
    await asyncio.sleep(0.05)
    release.set()
    await asyncio.gather(*holding)
    return await asyncio.gather(*tasks, return_exceptions=True)


def run_in_store(coro_fn, connector=None, **kwargs):
    store = DjangoStore(db_threads=THREADS, connector=connector)
    try:
        return store, asyncio.run(coro_fn(store, **kwargs))
    finally:
        store.close()


def test_commits_queued_together_share_one_statement():
    runs = claimed_runs(6)

    async def go(store):
        return await _commit_together(store, [(r, "a", a_step(0)) for r in runs])

    store, results = run_in_store(go)
    assert store.connector.group is not None and store.connector.group.largest_batch == 6
    assert all(not isinstance(r, BaseException) for r in results), results
    for run_id, result in zip(runs, results, strict=True):
        [entry] = Entry.objects.filter(run_id=run_id)
        assert result.entry_ids == [entry.id] and entry.output == 0
        assert entry.attempt_set.count() == 1 and entry.run.events.filter(name="progress").count() == 1
        assert Run.objects.get(id=run_id).state == {"at": 0}


def test_a_lost_lease_loses_only_its_own_commit():
    runs = claimed_runs(3)

    async def go(store):
        return await _commit_together(
            store,
            [(runs[0], "a", a_step(0)), (runs[1], "someone-else", a_step(0)), (runs[2], "a", a_step(0))],
        )

    store, results = run_in_store(go)
    assert store.connector.group.largest_batch == 3
    assert isinstance(results[1], LeaseLost)
    assert not Entry.objects.filter(run_id=runs[1]).exists()
    assert Entry.objects.filter(run_id__in=[runs[0], runs[2]]).count() == 2


def test_a_failing_commit_fails_alone_and_the_others_land():
    runs = claimed_runs(3)
    DjangoStore().commit(run_id=runs[1], owner="a", commit=a_step(0), now=now())  # position 0 taken

    async def go(store):
        return await _commit_together(store, [(r, "a", a_step(0, output="x")) for r in runs])

    _store, results = run_in_store(go)
    assert isinstance(results[1], IntegrityError)  # its own error, raised to its own waiter
    assert [Entry.objects.get(run_id=r).output for r in (runs[0], runs[2])] == ["x", "x"]
    assert Entry.objects.get(run_id=runs[1]).output == 0


def test_a_lone_commit_goes_alone():
    [run_id] = claimed_runs(1)

    async def go(store):
        return await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())

    store, lone = run_in_store(go)
    assert store.connector.group.largest_batch == 1 and lone.entry_ids


def test_a_statement_carries_at_most_one_transition():
    """A run's end may free a concurrency-group slot and put the group's next run back in line:
    one such end shares a statement with steps, two never share one (they would unpark the same
    run). On the threads' path a transition is written alone."""
    runs = claimed_runs(4)
    endings = [a_step(0), a_step(0)]
    for result, ending in enumerate(endings, 7):
        ending.transition = Transition(status="completed", result=result)

    async def go(store):
        return await _commit_together(
            store,
            [(runs[0], "a", a_step(0)), (runs[1], "a", endings[0]), (runs[2], "a", a_step(0)),
             (runs[3], "a", endings[1])],
        )  # fmt: skip

    store, results = run_in_store(go)
    assert all(not isinstance(r, BaseException) for r in results), results
    group = store.connector.group
    if isinstance(group, async_commits.AsyncCommits):
        assert (group.statements, group.largest_batch) == (2, 3)
    else:
        assert group.largest_batch <= 2
    for run_id, result in ((runs[1], 7), (runs[3], 8)):
        assert (Run.objects.get(id=run_id).status, Run.objects.get(id=run_id).result) == ("completed", result)


def test_off(path):
    """Without group commit each commit is a statement of its own: through the threads, or on the
    async connection one at a time."""
    runs = claimed_runs(3)

    async def go(store):
        return await _commit_together(store, [(r, "a", a_step(0)) for r in runs])

    alone = "threads" if path == "threads" else functools.partial(PostgresLoop, group=False)
    store, results = run_in_store(go, connector=alone)
    assert all(not isinstance(r, BaseException) for r in results), results
    if path == "threads":
        assert getattr(store.connector, "group", None) is None
    else:
        assert store.connector.group.largest_batch == 1 and store.connector.group.statements == 3
    assert Entry.objects.filter(run_id__in=runs).count() == 3


def test_a_connection_failure_under_a_group_fails_every_waiter_and_sends_nothing_again(monkeypatch, path):
    """Whether a statement landed is unknown when its connection fails: nothing is sent again
    (a second write of a landed step would break its history); each waiter gets StoreUnavailable
    and re-reads its history, as after any store failure."""
    runs = claimed_runs(3)

    def connection_lost(commits):
        raise OperationalError("server closed the connection unexpectedly")

    def cut_when_opened(store):
        """The async path's connection, cut by the server right after it opened (a restart, a
        network cut): the group's statement goes out on a connection that is gone."""
        group = store.connector.group
        connect = group.connection._connect

        async def connect_then_cut():
            conn = await connect()
            with psycopg.connect(**_libpq_params(), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [conn.info.backend_pid])
            return conn

        group.connection._connect = connect_then_cut

    if path == "threads":
        monkeypatch.setattr(commit_statement, "commit_group", connection_lost)

    async def go(store):
        if path == "async":
            cut_when_opened(store)
        return await _commit_together(store, [(r, "a", a_step(0)) for r in runs])

    store, results = run_in_store(go)
    assert store.connector.group.largest_batch == 3
    assert all(isinstance(r, StoreUnavailable) for r in results), results
    assert not Entry.objects.filter(run_id__in=runs).exists()  # not sent again alone


def test_a_group_failed_to_break_a_deadlock_is_sent_again_and_lands():
    """PostgreSQL fails one transaction of a deadlock, rolled back whole: the group's commits
    are sent again rather than said lost (which would run their steps again). A third connection
    holds the group's second row, then asks for its first: the group, waiting longer, is the
    one failed."""
    runs = claimed_runs(2)
    locked, ask = threading.Event(), threading.Event()

    def cross():
        with psycopg.connect(**_libpq_params()) as other:
            other.execute("SET deadlock_timeout = '60s'")  # the group's check comes first
            other.execute("SELECT 1 FROM workflows_run WHERE id = %s FOR UPDATE", [runs[1]])
            locked.set()
            ask.wait(10)
            other.execute("SELECT 1 FROM workflows_run WHERE id = %s FOR UPDATE", [runs[0]])
            other.commit()

    holder = threading.Thread(target=cross)
    holder.start()
    try:
        assert locked.wait(10)

        async def go(store):
            group = asyncio.ensure_future(_commit_together(store, [(r, "a", a_step(0)) for r in runs]))
            await asyncio.to_thread(wait_for, lambda: lock_waiters() == 1, 10, "the group to wait")
            ask.set()
            return await asyncio.wait_for(group, 20)

        store, results = run_in_store(go)
    finally:
        ask.set()
        holder.join(20)
    assert store.connector.group.largest_batch == 2
    assert all(not isinstance(r, BaseException) for r in results), results
    assert Entry.objects.filter(run_id__in=runs).count() == 2


def test_a_group_refused_before_the_server_saw_it_is_sent_again_commit_by_commit(monkeypatch):
    runs = claimed_runs(3)

    def refused(commits):
        raise ValueError("a value refused while building the statement")

    monkeypatch.setattr(commit_statement, "group_statement", refused)

    async def go(store):
        return await _commit_together(store, [(r, "a", a_step(0)) for r in runs])

    _store, results = run_in_store(go)
    assert all(not isinstance(r, BaseException) for r in results), results
    assert Entry.objects.filter(run_id__in=runs).count() == 3


def test_a_commit_after_the_store_closed_fails_instead_of_hanging():
    [run_id] = claimed_runs(1)

    async def go():
        store = DjangoStore(db_threads=THREADS)
        store.close()
        with pytest.raises(StoreUnavailable):
            await asyncio.wait_for(store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now()), 10)

    asyncio.run(go())
    assert not Entry.objects.filter(run_id=run_id).exists()


def test_more_commits_than_one_statement_takes_all_land(monkeypatch):
    """A job takes at most MAX_BATCH commits; the rest get a job of their own, even when no
    further commit comes to start one."""
    monkeypatch.setattr(group_commit, "MAX_BATCH", 4)
    monkeypatch.setattr(async_commits, "MAX_BATCH", 4)
    runs = claimed_runs(10)

    async def go(store):
        return await asyncio.wait_for(_commit_together(store, [(r, "a", a_step(0)) for r in runs]), 30)

    store, results = run_in_store(go)
    assert all(not isinstance(r, BaseException) for r in results), results
    assert store.connector.group.largest_batch == 4 and store.connector.group.statements >= 3
    assert Entry.objects.filter(run_id__in=runs).count() == 10


def test_commits_of_different_shapes_in_one_statement_each_get_their_own_outcome():
    """A statement puts its commits in order of shape; each waiter still gets its own entry id."""
    runs = claimed_runs(6)

    def bare(position: int) -> Commit:
        commit = a_step(position, output=f"bare {position}")
        commit.events, commit.state = [], None
        return commit

    commits = [(r, "a", a_step(0, output=f"full {n}") if n % 2 else bare(0)) for n, r in enumerate(runs)]

    async def go(store):
        return await _commit_together(store, commits)

    store, results = run_in_store(go)
    assert store.connector.group.largest_batch == 6
    for n, (run_id, result) in enumerate(zip(runs, results, strict=True)):
        [entry] = Entry.objects.filter(run_id=run_id)
        assert result.entry_ids == [entry.id]
        assert entry.output == (f"full {n}" if n % 2 else "bare 0")
        assert Run.objects.get(id=run_id).state == ({"at": 0} if n % 2 else {})


def a_plain_step(position: int, output: object, state: dict | None = None) -> Commit:
    """A step that succeeded at its first attempt (no attempt row), perhaps with new state, and
    nothing else: what a group sends as rows of its fixed part (`plain_commits`)."""
    started, finished = now(), now()
    entry = EntryWrite(
        id=None, scope="", position=position, name=f"s{position}", kind="step", status="completed",
        output=output, attempts=1, started_at=started, finished_at=finished,
    )  # fmt: skip
    attempt = AttemptWrite(number=1, started_at=started, finished_at=finished, outcome="ok")
    return Commit(entries=[(entry, attempt)], state=state)


def test_plain_commits_share_one_fixed_part_and_each_gets_its_own_outcome():
    """Plain step commits go as rows of one part whose text does not change with their number;
    each still gets its own entry, output and state, beside a commit of another shape."""
    runs = claimed_runs(5)
    outputs = [None, {"nested": ["é", 2**40, None]}, "text", [1.5, True]]
    commits = [
        (r, "a", a_plain_step(0, out, {"n": n} if n % 2 else None))
        for n, (r, out) in enumerate(zip(runs[:4], outputs, strict=True))
    ]
    commits.append((runs[4], "a", a_step(0, output="full")))
    pending = [(r, o, c, now()) for r, o, c in commits]
    assert (
        commit_statement.group_statement(pending[:2])[0] == commit_statement.group_statement(pending[:4])[0]
    )
    assert commit_statement.group_statement(pending[:4])[2] == ([0, 1, 2, 3], [])

    async def go(store):
        return await _commit_together(store, commits)

    store, results = run_in_store(go)
    assert store.connector.group.largest_batch == 5
    for n, (run_id, result) in enumerate(zip(runs, results, strict=True)):
        [entry] = Entry.objects.filter(run_id=run_id)
        assert result.entry_ids == [entry.id] and not result.cancel_requested and not result.hold
        assert entry.output == (outputs[n] if n < 4 else "full")
        assert (entry.kind, entry.status, entry.attempts, entry.superseded) == ("step", "completed", 1, False)
        write = commits[n][2].entries[0][0]
        assert (entry.started_at, entry.finished_at) == (write.started_at, write.finished_at)
        assert Run.objects.get(id=run_id).state == ({"n": n} if n % 2 else {} if n < 4 else {"at": 0})
    assert [Entry.objects.get(run_id=r).attempt_set.count() for r in runs] == [0, 0, 0, 0, 1]


def test_a_plain_step_of_a_lost_lease_or_a_held_run_gets_its_own_outcome():
    runs = claimed_runs(3)
    Run.objects.filter(id=runs[2]).update(cancel_requested=True, pause_requested=True)

    async def go(store):
        return await _commit_together(
            store, [(runs[0], "a", a_plain_step(0, 1)), (runs[1], "b", a_plain_step(0, 2)),
                    (runs[2], "a", a_plain_step(0, 3))],
        )  # fmt: skip

    _store, results = run_in_store(go)
    assert isinstance(results[1], LeaseLost) and not Entry.objects.filter(run_id=runs[1]).exists()
    assert (results[0].cancel_requested, results[0].hold) == (False, False)
    assert (results[2].cancel_requested, results[2].hold) == (True, True)
    assert [Entry.objects.get(run_id=r).output for r in (runs[0], runs[2])] == [1, 3]


def test_a_plain_step_refused_by_the_server_fails_alone_and_the_others_land():
    runs = claimed_runs(3)
    DjangoStore().commit(run_id=runs[1], owner="a", commit=a_plain_step(0, "first"), now=now())

    async def go(store):
        return await _commit_together(store, [(r, "a", a_plain_step(0, "x")) for r in runs])

    _store, results = run_in_store(go)
    assert isinstance(results[1], IntegrityError)  # position 0 taken: its own error, to its own waiter
    assert [Entry.objects.get(run_id=r).output for r in runs] == ["x", "first", "x"]


def test_plain_commits_with_events_and_stream_chunks_store_them_in_order_per_run():
    """A step's success with events, a commit of stream chunks alone, and a lost lease's commit
    of both, in one group: each run gets its own events and chunks in the order given, with its
    commit's time; the lost one writes nothing."""
    runs = claimed_runs(3)
    at = now()
    step = a_plain_step(0, "out", {"s": 1})
    step.live_events = [(f"e{i}", {"i": i}, EventOrigin(scope="", step="s0", attempt=1)) for i in range(3)]
    step.events = [("body", None)]
    chunks = Commit(
        stream_chunks=[StreamChunk(stream="s0", data={"t": i}, origin=EventOrigin(scope="", step="s0", attempt=1), seq=i, size=8)
                       for i in range(4)]
    )  # fmt: skip
    lost = Commit(events=[("lost", 1)], stream_chunks=chunks.stream_chunks[:1])

    async def go(store):
        return await _commit_together(
            store, [(runs[0], "a", step), (runs[1], "a", chunks), (runs[2], "b", lost)], at
        )

    store, results = run_in_store(go)
    assert store.connector.group.largest_batch == 3
    assert results[1].entry_ids == [] and isinstance(results[2], LeaseLost)
    assert results[0].entry_ids == [Entry.objects.get(run_id=runs[0]).id]
    events = list(Event.objects.filter(run_id=runs[0]).order_by("id"))
    assert [(e.name, e.payload, e.step, e.attempt) for e in events] == [
        ("body", None, "", None),
        *[(f"e{i}", {"i": i}, "s0", 1) for i in range(3)],
    ]
    assert {e.created_at for e in events} == {at}
    stored = list(StreamChunkRow.objects.filter(run_id=runs[1]).order_by("id"))
    assert [(c.seq, c.data, c.stream, c.created_at) for c in stored] == [
        (i, {"t": i}, "s0", at) for i in range(4)
    ]
    assert not Event.objects.filter(run_id=runs[2]).exists()
    assert not StreamChunkRow.objects.filter(run_id=runs[2]).exists()
    assert Run.objects.get(id=runs[0]).state == {"s": 1}
