"""SQLite, a runner's store: step commits written from the event loop on a connection of the
store's own (`sqlite_loop`). Beyond writing, it must never hold the loop waiting for a lock, write
nothing when it fails before COMMIT (the thread then writes it once), say a failed COMMIT as the
thread does, keep the WAL file from growing, and leave the runner's change check blind to its own
commits but not to anyone else's."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
import time

import pytest
from django.db import connection

from tests.support import a_step, now
from workflows.core.exceptions import LeaseLost, StoreUnavailable
from workflows.core.new_run import NewRun
from workflows.models import Attempt, Entry, Run
from workflows.storage.django import DjangoStore, sqlite_loop, writes
from workflows.storage.django.loop_connectors import SqliteLoop

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the store's own connections must see the rows
    pytest.mark.skipif(connection.vendor != "sqlite", reason="the loop commits are SQLite's"),
]


@pytest.fixture
def store():
    store = DjangoStore(db_threads=4, connector=SqliteLoop)  # SQLite: one thread whatever is asked
    assert store.connector.loop_commits is not None
    yield store
    store.close()


class LoopTicks:
    """Counts the event loop's 5 ms ticks while started: a loop held by a blocking call misses them."""

    def __init__(self) -> None:
        self.count = 0
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._tick())

    def stop(self) -> None:
        assert self._task is not None
        self._task.cancel()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(0.005)
            self.count += 1


def claimed_run(owner: str = "a") -> str:
    store = DjangoStore()
    store.get_or_create_run(NewRun(workflow="wf", key=["k"], version="v", initial_state={}, now=now()))
    [run] = store.claim(owner=owner, workflows=["wf"], limit=1, lease_seconds=30, now=now())
    return run.id


def database_file() -> str:
    return str(connection.settings_dict["NAME"])


def positions(run_id: str) -> list[int]:
    return sorted(Entry.objects.filter(run_id=run_id).values_list("position", flat=True))


def test_step_commits_are_written_from_the_loop(store):
    run_id = claimed_run()

    async def go():
        return [await store.acommit(run_id=run_id, owner="a", commit=a_step(i), now=now()) for i in range(3)]

    results = asyncio.run(go())
    assert store.connector.loop_commits.commits == 3 and store.connector.loop_commits.through_thread == 0
    assert positions(run_id) == [0, 1, 2]
    assert [r.entry_ids[0] for r in results] == sorted(Entry.objects.values_list("id", flat=True))
    assert Attempt.objects.filter(entry__run_id=run_id).count() == 3


def test_the_write_lock_taken_sends_the_commit_through_the_thread_and_the_loop_goes_on(store):
    """Another process's write transaction: the loop does not wait for it (busy timeout 0); the
    thread waits for the lock and writes the commit once it is free."""
    run_id = claimed_run()
    other = sqlite3.connect(database_file(), isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    ticks = LoopTicks()

    async def go():
        await store.connector.loop_commits.connection()
        ticks.start()
        release = threading.Timer(0.5, lambda: other.execute("COMMIT"))
        release.start()
        try:
            result = await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())
        finally:
            release.join()
            ticks.stop()
        return result

    try:
        result = asyncio.run(go())
    finally:
        other.close()
    assert ticks.count >= 20, "the loop was held while the lock was taken"
    assert store.connector.loop_commits.through_thread == 1 and store.connector.loop_commits.commits == 0
    assert positions(run_id) == [0] and result.entry_ids == list(Entry.objects.values_list("id", flat=True))


def test_while_the_thread_works_a_commit_waits_in_the_loop_and_is_written_there(store):
    """Not sent to the thread's queue (where it would also wait): written from the loop once the
    thread's call returns, the loop free meanwhile."""
    run_id = claimed_run()
    ticks = LoopTicks()

    async def go():
        await store.connector.loop_commits.connection()
        ticks.start()
        slow = asyncio.create_task(store.run_sync(time.sleep, 0.3))  # the thread at work
        await asyncio.sleep(0.01)
        try:
            await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())
            return slow.done()
        finally:
            await slow
            ticks.stop()

    assert asyncio.run(go()) is True, "the commit did not wait for the thread's call"
    assert ticks.count >= 20, "the loop was held while the commit waited"
    assert store.connector.loop_commits.commits == 1 and store.connector.loop_commits.through_thread == 0
    assert positions(run_id) == [0]


def test_a_call_whose_waiter_was_cancelled_does_not_hold_commits_for_ever(store):
    """Its return is not seen in the loop: the waiting commit looks again on its own."""
    run_id = claimed_run()

    async def go():
        await store.connector.loop_commits.connection()
        slow = asyncio.create_task(store.run_sync(time.sleep, 0.2))
        await asyncio.sleep(0.01)
        slow.cancel()  # the thread goes on with the call; nobody awaits it
        await asyncio.wait_for(store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now()), 5)

    asyncio.run(go())
    assert store.connector.loop_commits.commits == 1 and positions(run_id) == [0]


def test_a_call_cancelled_before_the_thread_started_it_does_not_hold_commits(store):
    """A queued call whose waiter is cancelled never runs (a race's losing branch, say): it
    counts as ended, or the commits would wait for the thread for ever."""
    run_id = claimed_run()

    async def go():
        await store.connector.loop_commits.connection()
        slow = asyncio.create_task(store.run_sync(time.sleep, 0.2))  # the thread at work
        queued = asyncio.create_task(store.run_sync(time.sleep, 0))  # behind it, in the queue
        await asyncio.sleep(0.01)
        queued.cancel()
        await asyncio.wait_for(store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now()), 5)
        await slow

    asyncio.run(go())
    assert store.connector.loop_commits.commits == 1 and positions(run_id) == [0]


def test_a_lost_lease_is_said_from_the_loop_and_nothing_is_written(store):
    run_id = claimed_run()
    Run.objects.filter(id=run_id).update(lease_owner="b")

    async def go():
        await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())

    with pytest.raises(LeaseLost):
        asyncio.run(go())
    assert store.connector.loop_commits.through_thread == 0 and store.connector.loop_commits.commits == 0
    assert positions(run_id) == []


def test_an_error_before_commit_writes_nothing_and_the_thread_writes_it_once(store, monkeypatch):
    """The loop's statements ran, then failed: rolled back, and the thread writes the commit."""
    run_id = claimed_run()
    real = writes.write_commit

    def fails_in_the_loop(cursor, *args, **kwargs):
        result = real(cursor, *args, **kwargs)
        if isinstance(cursor, sqlite_loop._Cursor):
            raise sqlite3.OperationalError("disk I/O error (simulated)")
        return result

    monkeypatch.setattr(writes, "write_commit", fails_in_the_loop)

    async def go():
        return await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())

    result = asyncio.run(go())
    assert store.connector.loop_commits.through_thread == 1 and store.connector.loop_commits.commits == 0
    assert positions(run_id) == [0] and Attempt.objects.count() == 1
    assert result.entry_ids == list(Entry.objects.values_list("id", flat=True))


class _CommitFails:
    """A loop connection whose COMMITs fail: ending the transaction (as an I/O error can: whether
    it landed is unknown) or leaving it open (as a deferred foreign key failing does)."""

    def __init__(self, conn: sqlite3.Connection, ends_it: bool) -> None:
        self._conn = conn
        self._ends_it = ends_it

    def execute(self, statement: str, *args):
        if statement == "COMMIT":
            if self._ends_it:
                self._conn.execute("ROLLBACK")
            raise sqlite3.OperationalError("disk I/O error (simulated)")
        return self._conn.execute(statement, *args)

    def __getattr__(self, name):
        return getattr(self._conn, name)


def test_a_commit_that_fails_and_ends_the_transaction_says_unavailable_then_reconnects(store, monkeypatch):
    run_id = claimed_run()
    real_open = sqlite_loop._open
    monkeypatch.setattr(sqlite_loop, "_open", lambda params: _CommitFails(real_open(params), ends_it=True))

    async def fails():
        await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())

    with pytest.raises(StoreUnavailable):
        asyncio.run(fails())
    assert store.connector.loop_commits._conn is None and store.connector.loop_commits.through_thread == 0
    monkeypatch.setattr(sqlite_loop, "_open", real_open)

    async def again():
        return await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())

    asyncio.run(again())
    assert store.connector.loop_commits.commits == 1 and positions(run_id) == [0]


def test_a_commit_that_fails_and_leaves_the_transaction_open_is_written_by_the_thread(store, monkeypatch):
    run_id = claimed_run()
    real_open = sqlite_loop._open
    monkeypatch.setattr(sqlite_loop, "_open", lambda params: _CommitFails(real_open(params), ends_it=False))

    async def go():
        return await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())

    result = asyncio.run(go())
    assert store.connector.loop_commits.through_thread == 1 and store.connector.loop_commits.commits == 0
    assert not store.connector.loop_commits._conn.in_transaction  # rolled back: the lock is not held
    assert positions(run_id) == [0] and result.entry_ids == list(Entry.objects.values_list("id", flat=True))


def test_checkpoints_keep_the_wal_file_from_growing(store, monkeypatch):
    """No automatic checkpoint on the loop's connection: the thread's, every CHECKPOINT_EVERY
    commits, copy the WAL whole, so the file starts over instead of growing with every commit."""
    monkeypatch.setattr(sqlite_loop, "CHECKPOINT_EVERY", 10)
    run_id = claimed_run()
    commits = 200

    async def go():
        for i in range(commits):
            await store.acommit(run_id=run_id, owner="a", commit=a_step(i), now=now())

    asyncio.run(go())
    assert store.connector.loop_commits.commits > commits * 0.8  # most in the loop; some behind a checkpoint
    # The frames the WAL holds since it last started over (not the file's size: SQLite keeps the
    # file at its largest, and the suite's earlier tests wrote to it). Each commit appends about 9
    # pages: with no checkpoint it would hold commits * 9 frames at least.
    reader = sqlite3.connect(database_file())
    try:
        _busy, frames, _copied = reader.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    finally:
        reader.close()
    assert frames < 4 * 10 * 9 < commits * 9
    assert positions(run_id) == list(range(commits))


def test_the_watch_wakes_for_other_connections_commits_not_for_its_own(store):
    run_id = claimed_run()
    woken = asyncio.Event

    async def go():
        wake = woken()
        watcher = asyncio.create_task(store.watch(wake.set))
        try:
            await asyncio.sleep(0.05)  # the watch's first reading
            for i in range(5):  # the runner's own step commits, from the loop
                await store.acommit(run_id=run_id, owner="a", commit=a_step(i), now=now())
                await asyncio.sleep(0.02)  # two polls each
            own = wake.is_set()
            other = sqlite3.connect(database_file(), isolation_level=None)
            other.execute("UPDATE workflows_run SET priority = 1 WHERE id = ?", [run_id.replace("-", "")])
            other.close()
            await asyncio.wait_for(wake.wait(), timeout=5)
            return own
        finally:
            watcher.cancel()

    assert asyncio.run(go()) is False, "the runner's own commits woke it"
    assert store.connector.loop_commits.commits == 5


def test_the_threads_connector_keeps_every_commit_in_the_thread():
    store = DjangoStore(db_threads=1, connector="threads")
    try:
        assert getattr(store.connector, "loop_commits", None) is None
        run_id = claimed_run()
        asyncio.run(store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now()))
        assert positions(run_id) == [0]
    finally:
        store.close()


def test_the_watch_wakes_when_its_connection_fails_and_when_it_is_back_not_at_every_poll(monkeypatch):
    """`version` gives None while the loop's connection fails: one wake then, one when it is back."""
    from workflows.storage.django import notify

    monkeypatch.setattr(notify, "SQLITE_POLL", 0.001)
    readings = iter([1, 1, None, None, None, None, 2, 2, 2])
    wakes = []

    async def go():
        done = asyncio.Event()

        def version():
            value = next(readings, 2)
            if value == 2 and len(wakes) == 2:
                done.set()
            return value

        watcher = asyncio.create_task(notify.poll_data_version_in_loop(version, lambda: wakes.append(1)))
        try:
            await asyncio.wait_for(done.wait(), timeout=5)
            await asyncio.sleep(0.02)  # more polls, all reading 2
        finally:
            watcher.cancel()

    asyncio.run(go())
    assert len(wakes) == 2


def claimed_runs(n: int, owner: str = "a") -> list[str]:
    store = DjangoStore()
    for i in range(n):
        store.get_or_create_run(
            NewRun(workflow="wf", key=[f"k{i}"], version="v", initial_state={}, now=now())
        )
    return [
        run.id for run in store.claim(owner=owner, workflows=["wf"], limit=n, lease_seconds=30, now=now())
    ]


def test_commits_ready_in_one_turn_of_the_loop_share_one_transaction(store):
    warm, *run_ids = claimed_runs(6)

    async def go():
        await store.acommit(run_id=warm, owner="a", commit=a_step(0), now=now())  # the connection is open
        commits = [store.acommit(run_id=r, owner="a", commit=a_step(0), now=now()) for r in run_ids]
        return await asyncio.gather(*commits)

    results = asyncio.run(go())
    loop_commits = store.connector.loop_commits
    assert (loop_commits.commits, loop_commits.transactions, loop_commits.through_thread) == (6, 2, 0)
    assert all(positions(r) == [0] for r in run_ids)
    assert sorted(r.entry_ids[0] for r in results) == sorted(
        Entry.objects.filter(run_id__in=run_ids).values_list("id", flat=True)
    )


def test_in_a_shared_transaction_a_lost_lease_fails_its_own_commit_only(store):
    warm, *run_ids = claimed_runs(4)
    Run.objects.filter(id=run_ids[1]).update(lease_owner="b")

    async def go():
        await store.acommit(run_id=warm, owner="a", commit=a_step(0), now=now())  # the connection is open
        commits = [store.acommit(run_id=r, owner="a", commit=a_step(0), now=now()) for r in run_ids]
        return await asyncio.gather(*commits, return_exceptions=True)

    first, lost, last = asyncio.run(go())
    assert (
        isinstance(lost, LeaseLost)
        and not isinstance(first, BaseException)
        and not isinstance(last, BaseException)
    )
    assert [positions(r) for r in run_ids] == [[0], [], [0]]
    assert (store.connector.loop_commits.commits, store.connector.loop_commits.transactions) == (3, 2)


def test_a_commit_whose_waiter_is_cancelled_before_the_turn_ends_is_not_written(store):
    warm, *run_ids = claimed_runs(3)

    async def go():
        await store.acommit(run_id=warm, owner="a", commit=a_step(0), now=now())  # the connection is open
        kept = asyncio.ensure_future(store.acommit(run_id=run_ids[0], owner="a", commit=a_step(0), now=now()))
        dropped = asyncio.ensure_future(
            store.acommit(run_id=run_ids[1], owner="a", commit=a_step(0), now=now())
        )
        await asyncio.sleep(0)  # both joined the batch; its write comes at the end of the turn
        dropped.cancel()
        await kept
        with pytest.raises(asyncio.CancelledError):
            await dropped

    asyncio.run(go())
    assert [positions(r) for r in run_ids] == [[0], []]
    assert (store.connector.loop_commits.commits, store.connector.loop_commits.transactions) == (2, 2)
