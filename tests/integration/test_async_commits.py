"""The async commit path (PostgreSQL, a runner's store): step commits sent from the event loop on
the store's own psycopg connection. What it must do beyond writing (`test_group_commit.py` covers
the writing): survive its connection failing, a waiter cancelled mid-statement, a new event loop,
and prepare its statements only when PREPARED_STATEMENTS says so."""

from __future__ import annotations

import asyncio
import threading

import psycopg
import pytest
from django.db import connection

from tests.support import a_step, now, wait_for
from workflows.core.exceptions import LeaseLost, StoreUnavailable
from workflows.core.new_run import NewRun
from workflows.models import Entry
from workflows.storage.django import DjangoStore
from workflows.storage.django.loop_connectors import PostgresLoop
from workflows.storage.django.notify import _libpq_params

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the store's own connections must see the rows
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the async commit path is PostgreSQL's"),
]


def claimed_run(key: str = "k") -> str:
    store = DjangoStore()
    store.get_or_create_run(NewRun(workflow="wf", key=[key], version="v", initial_state={}, now=now()))
    [run] = store.claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    return run.id


@pytest.fixture
def store(runner_store):
    return runner_store


def test_a_connection_cut_under_it_says_unavailable_and_the_next_commit_reconnects(store):
    run_id = claimed_run()

    async def go():
        await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())
        pid = store.connector.group.connection.current.info.backend_pid
        with psycopg.connect(**_libpq_params(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(StoreUnavailable):
            await store.acommit(run_id=run_id, owner="a", commit=a_step(1), now=now())
        await store.acommit(run_id=run_id, owner="a", commit=a_step(1), now=now())
        return pid, store.connector.group.connection.current.info.backend_pid

    before, after = asyncio.run(go())
    assert before != after
    assert sorted(Entry.objects.filter(run_id=run_id).values_list("position", flat=True)) == [0, 1]


def test_a_waiter_cancelled_mid_statement_leaves_the_path_working(store):
    """The statement goes on without its waiter (as a database thread's would); the connection
    is not left mid-query, and the next commit lands."""
    run_id = claimed_run()
    locked, release = threading.Event(), threading.Event()

    def hold_the_run_row():
        with psycopg.connect(**_libpq_params()) as other:
            other.execute("SELECT 1 FROM workflows_run WHERE id = %s FOR UPDATE", [run_id])
            locked.set()
            release.wait(10)
            other.commit()

    holder = threading.Thread(target=hold_the_run_row)
    holder.start()
    try:
        assert locked.wait(10)

        async def go():
            waiting = asyncio.ensure_future(
                store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())
            )
            await asyncio.to_thread(
                wait_for,
                lambda: _waits_on_a_lock(
                    store.connector.group.connection.current
                    and store.connector.group.connection.current.info.backend_pid
                ),
                10,
                "the commit to wait on the row lock",
            )
            waiting.cancel()
            release.set()
            await store.acommit(run_id=run_id, owner="a", commit=a_step(1), now=now())
            return waiting.cancelled()

        assert asyncio.run(go())
    finally:
        release.set()
        holder.join(10)
    assert sorted(Entry.objects.filter(run_id=run_id).values_list("position", flat=True)) == [0, 1]


def _waits_on_a_lock(pid: int | None) -> bool:
    if pid is None:
        return False
    with psycopg.connect(**_libpq_params(), autocommit=True) as admin:
        row = admin.execute("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()
    return row is not None and row[0] == "Lock"


def test_a_new_event_loop_gets_a_connection_of_its_own(store):
    run_id = claimed_run()

    async def commit(position: int) -> int:
        await store.acommit(run_id=run_id, owner="a", commit=a_step(position), now=now())
        return store.connector.group.connection.current.info.backend_pid

    first = asyncio.run(commit(0))
    second = asyncio.run(commit(1))
    assert first != second
    assert Entry.objects.filter(run_id=run_id).count() == 2


def test_a_lost_lease_alone_is_raised_and_writes_nothing(store):
    run_id = claimed_run()

    async def go():
        with pytest.raises(LeaseLost):
            await store.acommit(run_id=run_id, owner="someone-else", commit=a_step(0), now=now())

    asyncio.run(go())
    assert not Entry.objects.filter(run_id=run_id).exists()


@pytest.mark.parametrize("prepared", [True, False])
def test_statements_are_prepared_only_when_asked(settings, prepared):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "PREPARED_STATEMENTS": prepared}
    run_id = claimed_run()
    store = DjangoStore(db_threads=1, connector=PostgresLoop)

    async def go() -> int:
        for position in range(3):
            await store.acommit(run_id=run_id, owner="a", commit=a_step(position), now=now())
        cursor = await store.connector.group.connection.current.execute(
            "SELECT count(*) FROM pg_prepared_statements"
        )
        return (await cursor.fetchone())[0]

    try:
        count = asyncio.run(go())
    finally:
        store.close()
    assert count == (1 if prepared else 0)
    assert Entry.objects.filter(run_id=run_id).count() == 3


def test_a_group_statement_is_prepared_when_its_text_comes_again(settings):
    """Runs' commits queued together go as one statement; its text is prepared only the second
    time it is sent, so texts sent once never take a prepared statement's place."""
    settings.WORKFLOWS = {**settings.WORKFLOWS, "PREPARED_STATEMENTS": True}
    runs = [claimed_run("k1"), claimed_run("k2")]
    store = DjangoStore(db_threads=1, connector=PostgresLoop)

    async def prepared_after_each_group() -> list[int]:
        counts = []
        for position in range(3):
            await asyncio.gather(
                *(store.acommit(run_id=r, owner="a", commit=a_step(position), now=now()) for r in runs)
            )
            cursor = await store.connector.group.connection.current.execute(
                "SELECT count(*) FROM pg_prepared_statements"
            )
            counts.append((await cursor.fetchone())[0])
        return counts

    try:
        counts = asyncio.run(prepared_after_each_group())
        commits, statements = store.connector.group.commits, store.connector.group.statements
    finally:
        store.close()
    assert (commits, statements) == (6, 3)  # each pair went as one statement
    assert counts == [0, 1, 1]
    assert Entry.objects.filter(run_id__in=runs).count() == 6


def test_closing_the_store_closes_its_connection():
    run_id = claimed_run()
    store = DjangoStore(db_threads=1, connector=PostgresLoop)

    async def go():
        await store.acommit(run_id=run_id, owner="a", commit=a_step(0), now=now())
        return store.connector.group.connection.current

    conn = asyncio.run(go())
    store.close()
    assert conn.closed
