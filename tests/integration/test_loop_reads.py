"""A runner's claims and resume reads sent from its event loop (PostgreSQL, a runner's store):
the same answers as through the database threads, the threads taking over while a call is in
flight or when a statement is refused, and a failed connection said and replaced."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools

import psycopg
import pytest
from django.db import ProgrammingError, connection

from tests.support import a_step, now
from workflows.core.exceptions import RunNotFound, StoreUnavailable
from workflows.core.new_run import NewRun
from workflows.core.records import OutgoingMessage
from workflows.models import Run
from workflows.storage.django import DjangoStore, resumes
from workflows.storage.django.loop_connectors import PostgresLoop
from workflows.storage.django.notify import _libpq_params

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the store's own connections must see the rows
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the loop's connections are PostgreSQL's"),
]


@pytest.fixture
def store(runner_store):
    return runner_store


def create(n: int, group: str | None = None) -> list[str]:
    store = DjangoStore()
    return [
        store.get_or_create_run(
            NewRun(
                workflow="wf",
                key=[f"k{i}"],
                version="v",
                initial_state={},
                now=now(),
                concurrency_group=group,
            )
        )[0].id
        for i in range(n)
    ]


def claim(store: DjangoStore, **kwargs):
    args = {"owner": "a", "workflows": ["wf"], "limit": 10, "lease_seconds": 30, "now": now(), **kwargs}
    return store.aclaim(**args)


def test_a_claim_from_the_loop_leases_the_due_runs_in_order(store):
    ids = create(3)
    runs = asyncio.run(claim(store, limit=2))
    assert store.connector.reads.calls == 1
    assert [r.id for r in runs] == ids[:2]  # FIFO
    assert all(r.fresh and not r.taken_over and r.lease_owner == "a" for r in runs)
    assert sorted(
        Run.objects.filter(status="running", lease_owner="a").values_list("id", flat=True)
    ) == sorted(Run.objects.filter(id__in=ids[:2]).values_list("id", flat=True))


def test_a_lapsed_lease_claimed_from_the_loop_is_a_takeover(store):
    [run_id] = create(1)
    DjangoStore().claim(owner="gone", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    Run.objects.filter(id=run_id).update(wake_at=now() - dt.timedelta(seconds=1))  # the lease lapses
    [run] = asyncio.run(claim(store))
    assert store.connector.reads.calls == 1
    assert run.taken_over and run.previous_owner == "gone" and not run.fresh


def test_a_claim_of_workflows_with_a_concurrency_limit_goes_through_the_threads(store):
    create(2, group="g")
    runs = asyncio.run(claim(store, concurrency={"wf": 1}))
    assert len(runs) == 1 and store.connector.reads.calls == 0


def test_a_resume_read_from_the_loop_matches_the_threads(store):
    [run_id] = create(1)
    DjangoStore().claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    for position in range(3):
        DjangoStore().commit(run_id=run_id, owner="a", commit=a_step(position), now=now())
    for body in ("x", "y"):
        DjangoStore().send(OutgoingMessage(queue="q", body=body, run_id=run_id), now=now())
    history, messages = asyncio.run(store.aload_resume(run_id))
    assert store.connector.reads.calls == 1
    assert (history, messages) == DjangoStore().load_resume(run_id)
    assert [e.output for e in history] == [0, 1, 2] and [m.body for m in messages] == ["x", "y"]


def test_a_run_created_from_the_loop_is_runnable_and_a_taken_key_answers_its_run(store):
    start = {"workflow": "wf", "version": "v", "initial_state": {"n": 1}, "now": now()}

    async def go():
        made, created = await store.aget_or_create_run(NewRun(key=["k"], **start))
        again, created_again = await store.aget_or_create_run(NewRun(key=["k"], **start))
        return made, created, again, created_again

    made, created, again, created_again = asyncio.run(go())
    assert created and made.fresh and made.state == {"n": 1} and made.status == "pending"
    assert (again.id, created_again) == (made.id, False)
    assert store.connector.reads.calls == 2  # the taken key's read went through a thread
    assert [
        r.id for r in DjangoStore().claim(owner="a", workflows=["wf"], limit=5, lease_seconds=30, now=now())
    ] == [made.id]


def test_a_run_read_from_the_loop_matches_the_threads_and_a_missing_one_is_not_found(store):
    [run_id] = create(1)
    assert asyncio.run(store.aget_run(run_id)) == DjangoStore().get_run(run_id)
    assert store.connector.reads.calls == 1
    for missing in ("7d1a8a1e-0000-4000-8000-000000000000", "not-a-uuid"):
        with pytest.raises(RunNotFound):
            asyncio.run(store.aget_run(missing))


def ran_before(run_id: str, steps: int, messages: list[str]) -> None:
    """The run executed `steps` steps under runner "a", then waits (due now) with `messages`."""
    DjangoStore().claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    for position in range(steps):
        DjangoStore().commit(run_id=run_id, owner="a", commit=a_step(position), now=now())
    Run.objects.filter(id=run_id).update(
        status="waiting", lease_owner="", wake_at=now() - dt.timedelta(seconds=1)
    )
    for body in messages:
        DjangoStore().send(OutgoingMessage(queue="q", body=body, run_id=run_id), now=now())


def test_a_claim_reads_what_its_runs_that_ran_before_need_to_resume_in_its_own_round_trip(store):
    first, second = create(2)
    ran_before(first, 3, ["x", "y"])
    ran_before(second, 1, [])
    expected = {run_id: DjangoStore().load_resume(run_id) for run_id in (first, second)}

    async def go():
        runs = await claim(store)
        return runs, {run.id: await store.aload_resume(run.id) for run in runs}

    runs, resumed = asyncio.run(go())
    assert {r.id for r in runs} == {first, second} and not any(r.fresh for r in runs)
    assert store.connector.reads.calls == 1  # the claim; no read of its own
    assert resumed == expected
    assert [e.output for e in resumed[first][0]] == [0, 1, 2] and [m.body for m in resumed[first][1]] == [
        "x",
        "y",
    ]
    assert [e.output for e in resumed[second][0]] == [0] and resumed[second][1] == []


def test_a_claim_keeps_nothing_for_a_fresh_run_nor_for_one_taken_over(store):
    lapsed, fresh = create(2)
    ran_before(lapsed, 1, [])
    DjangoStore().claim(owner="gone", workflows=["wf"], limit=1, lease_seconds=30, now=now())
    Run.objects.filter(id=lapsed).update(wake_at=now() - dt.timedelta(seconds=1))  # its lease lapses

    runs = asyncio.run(claim(store))
    assert {r.id: (r.fresh, r.taken_over) for r in runs} == {fresh: (True, False), lapsed: (False, True)}
    assert store._prefetched == {}  # the taken-over run reads after its recovery writes


def test_more_messages_than_a_resume_reads_leave_them_to_the_wait(store, monkeypatch):
    monkeypatch.setattr(resumes, "RESUME_MESSAGES", 1)
    [run_id] = create(1)
    for body in ("x", "y"):
        DjangoStore().send(OutgoingMessage(queue="q", body=body, run_id=run_id), now=now())
    _history, messages = asyncio.run(store.aload_resume(run_id))
    assert messages is None and store.connector.reads.calls == 1


def test_a_call_while_another_is_in_flight_goes_through_the_threads(store):
    ids = create(2)

    async def go():
        return await asyncio.gather(store.aload_resume(ids[0]), store.aload_resume(ids[1]))

    assert asyncio.run(go()) == [([], []), ([], [])]
    assert store.connector.reads.calls == 1  # the other went through a thread


def test_a_refused_statement_is_made_again_through_the_threads_which_raise_their_error(store, monkeypatch):
    monkeypatch.setattr(
        resumes, "RESUME_READ", "SELECT no_such_column FROM workflows_message WHERE run_id = %s LIMIT %s"
    )
    [run_id] = create(1)
    with pytest.raises((ProgrammingError, psycopg.ProgrammingError)):  # as the threads raise it
        asyncio.run(store.aload_resume(run_id))
    assert store.connector.reads.refused == 1


def test_a_connection_cut_under_it_says_unavailable_and_the_next_call_reconnects(store):
    [run_id] = create(1)

    async def go():
        await store.aload_resume(run_id)
        pid = store.connector.reads.connection.current.info.backend_pid
        with psycopg.connect(**_libpq_params(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(StoreUnavailable):
            await store.aload_resume(run_id)
        assert await claim(store) != []
        return pid, store.connector.reads.connection.current.info.backend_pid

    before, after = asyncio.run(go())
    assert before != after


def test_a_call_cancelled_mid_way_drops_the_connection_and_the_next_one_works(store):
    [run_id] = create(1)

    async def cancelled_mid_way() -> bool:
        """One call cancelled after it has sent its statements; whether the cancel landed (on a
        loaded machine the answer can be in before the cancel, and then there is nothing to see)."""
        await store.aload_resume(run_id)
        first = store.connector.reads.connection.current
        call = asyncio.ensure_future(store.aload_resume(run_id))
        await asyncio.sleep(0)  # it has sent its statements
        call.cancel()
        try:
            await call
        except asyncio.CancelledError:
            assert first.closed  # not left mid-pipeline for the next call
            assert await store.aload_resume(run_id) == ([], [])
            return True
        return False

    async def go() -> bool:
        for _ in range(20):
            if await cancelled_mid_way():
                return True
        return False

    assert asyncio.run(go()), "no cancel landed mid-call in 20 tries"


def test_off():
    store = DjangoStore(db_threads=1, connector=functools.partial(PostgresLoop, reads=False))
    try:
        assert store.connector.reads is None
        create(1)
        assert len(asyncio.run(claim(store))) == 1
    finally:
        store.close()
