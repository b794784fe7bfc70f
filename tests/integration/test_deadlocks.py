"""Row-lock conflicts on PostgreSQL between a runner's own connections (its database threads and
its async commit connection) and others'. A statement that waits for a row while holding another
can deadlock; PostgreSQL then fails one transaction, rolled back whole. The runner's writes are
built not to deadlock with each other, and a commit that PostgreSQL fails to break a deadlock is
sent again: failing it would run its step again."""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest
from django.db import connection

from tests.support import a_step, claimed_runs, lock_waiters, now, wait_for
from workflows.core.records import OutgoingMessage
from workflows.models import Entry, Message
from workflows.storage.django.notify import _libpq_params

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the store's own connections must see the rows
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks and deadlocks: PostgreSQL's"),
]


@pytest.fixture
def store(runner_store):
    return runner_store


@pytest.mark.parametrize("first", [0, 1])
def test_a_heartbeat_and_a_grouped_commit_of_the_same_runs_never_deadlock(store, first):
    """A runner's heartbeat (a database thread) and its grouped step commit (the async
    connection) lock the same run rows, each in an order of its own. Here the commit waits for
    one row (held by a third connection) while the heartbeat comes: were the heartbeat to lock
    the other row and then wait, the two would deadlock once the row is free, and PostgreSQL
    would fail one of them. Both orders of the commit's rows are tried, so that whichever order
    the heartbeat scans in, one case crosses it."""
    run_ids = claimed_runs(2)
    ordered = [run_ids[first], run_ids[1 - first]]  # the commit's order: its first row is held
    locked, release = threading.Event(), threading.Event()

    def hold(run_id: str):
        with psycopg.connect(**_libpq_params()) as other:
            other.execute("SELECT 1 FROM workflows_run WHERE id = %s FOR UPDATE", [run_id])
            locked.set()
            release.wait(10)
            other.commit()

    holder = threading.Thread(target=hold, args=(ordered[0],))
    holder.start()
    try:
        assert locked.wait(10)

        async def go():
            commits = [
                asyncio.ensure_future(store.acommit(run_id=r, owner="a", commit=a_step(0), now=now()))
                for r in ordered
            ]  # queued in one turn: one statement
            await asyncio.to_thread(wait_for, lambda: lock_waiters() == 1, 10, "the commit to wait")
            beat = asyncio.ensure_future(
                store.aheartbeat(owner="a", run_ids=run_ids, lease_seconds=30, now=now())
            )
            await asyncio.to_thread(wait_for, lambda: lock_waiters() == 2, 10, "the heartbeat to wait")
            release.set()
            return await asyncio.wait_for(asyncio.gather(beat, *commits), 10)

        held, *results = asyncio.run(go())
    finally:
        release.set()
        holder.join(10)
    assert held == {run_id: False for run_id in run_ids}
    assert [r.entry_ids != [] for r in results] == [True, True]
    assert store.connector.group.largest_batch == 2
    assert Entry.objects.filter(run_id__in=run_ids).count() == 2


def test_a_lone_commit_failed_to_break_a_deadlock_is_sent_again_and_lands(store):
    """A commit of several statements (a step and a message to another run) locks its own run,
    then the other. A third connection holds the other run, then asks for the first: the
    commit, waiting longer, is the one PostgreSQL fails; sent again, it lands once."""
    sender, receiver = claimed_runs(2)
    locked, ask = threading.Event(), threading.Event()

    def cross():
        with psycopg.connect(**_libpq_params()) as other:
            other.execute("SET deadlock_timeout = '60s'")  # the commit's check comes first
            other.execute("SELECT 1 FROM workflows_run WHERE id = %s FOR UPDATE", [receiver])
            locked.set()
            ask.wait(10)
            other.execute("SELECT 1 FROM workflows_run WHERE id = %s FOR UPDATE", [sender])
            other.commit()

    holder = threading.Thread(target=cross)
    holder.start()
    commit = a_step(0)
    commit.messages = [OutgoingMessage(queue="q", body="hi", run_id=receiver)]
    try:
        assert locked.wait(10)

        async def go():
            sent = asyncio.ensure_future(store.acommit(run_id=sender, owner="a", commit=commit, now=now()))
            await asyncio.to_thread(wait_for, lambda: lock_waiters() == 1, 10, "the commit to wait")
            ask.set()
            return await asyncio.wait_for(sent, 20)

        result = asyncio.run(go())
    finally:
        ask.set()
        holder.join(20)
    [entry] = Entry.objects.filter(run_id=sender)
    assert result.entry_ids == [entry.id]
    assert list(Message.objects.filter(run_id=receiver).values_list("body", flat=True)) == ["hi"]
