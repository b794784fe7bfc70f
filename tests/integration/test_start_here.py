"""`Runner.start`: a run started in a runner's process is executed there at once. The run is created
already leased to that runner (no claim; on PostgreSQL in one statement and with no NOTIFY, on
SQLite in one transaction); a key that already has a run,
a workflow with a concurrency limit or a stopping runner take the usual way (a claim). A run
created held by a runner that then dies is taken over as any claimed run is."""

from __future__ import annotations

import asyncio
import datetime as dt

import psycopg
import pytest
from django.db import connection

from workflows import Concurrency, queue, setup, workflow
from workflows.core.new_run import NewRun
from workflows.engine.runner import Runner
from workflows.models import Run
from workflows.storage.django import DjangoStore
from workflows.storage.django.notify import NOTIFY_CHANNEL, _libpq_params

pytestmark = pytest.mark.django_db(transaction=True)  # the store's own connections see the rows

PG = connection.vendor == "postgresql"
CALLS: list[str] = []


async def body(ctx):
    await ctx.step("one", lambda s: CALLS.append(ctx.run_id) or 1)
    return {"done": True}


async def grouped_body(ctx):
    return 2


async def waiting_body(ctx):
    message = await ctx.queue.next("wait", names=["go"])
    return message.body


REGISTRY = setup(
    use={
        "here": workflow(body),
        "capped": workflow(grouped_body, concurrency=Concurrency(max=1, key=lambda run: run.key[0])),
        "waits": workflow(waiting_body, queues={"go": queue()}),
    }
)


class CountingClaims(DjangoStore):
    """The runner's store, counting its claims."""

    def __init__(self) -> None:
        super().__init__(db_threads=2)
        self.claims = 0

    async def aclaim(self, **kwargs):
        self.claims += 1
        return await super().aclaim(**kwargs)


@pytest.fixture
def store():
    CALLS.clear()
    store = CountingClaims()
    yield store
    store.close()


def runner(store: DjangoStore, **kwargs) -> Runner:
    return Runner(registry=REGISTRY, store=store, watch=False, **kwargs)


def test_a_run_started_here_completes_each_step_once(store):
    async def main():
        r = runner(store)
        handle = await r.start("here", ["a"])
        assert handle.run_id in r._tasks  # executing already, before any claim
        await r.executed(handle.run_id)
        return handle, await handle.ainfo()

    handle, info = asyncio.run(main())
    assert handle.created and store.claims == 0
    assert info.status == "completed" and info.result == {"done": True}
    assert CALLS == [handle.run_id]
    row = Run.objects.get(id=handle.run_id)
    assert row.lease_owner == "" and row.started_at is not None and row.wake_at is None


@pytest.mark.skipif(not PG, reason="NOTIFY is PostgreSQL's")
def test_on_postgresql_a_run_started_here_needs_no_claim_and_wakes_no_runner(store):
    listener = psycopg.connect(**_libpq_params(), autocommit=True)
    listener.execute(f"LISTEN {NOTIFY_CHANNEL}")

    def notified() -> int:
        listener.execute("SELECT 1")  # notifications arrive with a server round trip
        return sum(1 for _ in listener.notifies(timeout=0.2, stop_after=None))

    async def main():
        r = runner(store)
        handle = await r.start("here", ["b"])
        assert handle.run_id in r._tasks  # executing already, before any claim
        await r.executed(handle.run_id)
        return handle, await handle.ainfo()

    try:
        handle, info = asyncio.run(main())
        held = notified()
        REGISTRY.client("here", store=DjangoStore()).get_or_create(["elsewhere"])  # the usual way
        usual = notified()
    finally:
        listener.close()
    assert info.status == "completed" and store.claims == 0
    assert CALLS == [handle.run_id]
    assert (held, usual) == (0, 1)


def test_a_key_that_has_a_run_answers_it_and_executes_nothing_here(store):
    existing = REGISTRY.client("here", store=DjangoStore()).get_or_create(["c"])

    async def main():
        r = runner(store)
        handle = await r.start("here", ["c"])
        executing = set(r._tasks)
        await r.run_due()
        return handle, executing

    handle, executing = asyncio.run(main())
    assert handle.run_id == existing.run_id and not handle.created
    assert executing == set()  # not held: it waited for the claim, which ran it once
    assert CALLS == [existing.run_id]


def test_a_workflow_with_a_concurrency_limit_is_left_to_a_claim(store):
    async def main():
        r = runner(store)
        handle = await r.start("capped", ["g"])
        status = (await handle.ainfo()).status
        await r.run_due()
        return status, await handle.ainfo()

    status, info = asyncio.run(main())
    assert status == "pending" and store.claims >= 1
    assert info.status == "completed" and info.result == 2


def test_a_stopping_runner_leaves_the_run_to_a_claim(store):
    async def main():
        r = runner(store)
        r.request_stop()
        handle = await r.start("here", ["d"])
        return handle, set(r._tasks)

    handle, executing = asyncio.run(main())
    assert executing == set() and Run.objects.get(id=handle.run_id).status == "pending"
    assert CALLS == []


def test_a_bad_key_or_state_changes_nothing(store):
    from workflows.core.exceptions import BadInput

    async def main():
        r = runner(store)
        with pytest.raises(BadInput):
            await r.start("here", [])
        with pytest.raises(BadInput):
            await r.start("here", ["e"], state="not a dict")

    asyncio.run(main())
    assert Run.objects.count() == 0


def test_a_held_run_whose_runner_died_is_taken_over_and_completes(store):
    now = dt.datetime.now(dt.UTC)
    run, created, held = DjangoStore().get_or_create_held_run(NewRun(workflow="here", key=["f"], version=REGISTRY.get("here").version, initial_state={}, now=now), owner="gone", lease_seconds=30)  # fmt: skip
    assert created and held and run.fresh and run.lease_owner == "gone" and run.status == "running"
    Run.objects.filter(id=run.id).update(wake_at=now - dt.timedelta(seconds=1))  # its lease lapses

    async def main():
        await runner(store).run_due()
        return await REGISTRY.client("here", store=store).aget_by_id(run.id)

    handle = asyncio.run(main())
    assert handle.info().status == "completed" and CALLS == [run.id]


def test_a_run_started_here_that_waits_is_woken_by_its_message(store):
    async def main():
        r = runner(store)
        handle = await r.start("waits", ["w"])
        await r.executed(handle.run_id)
        await r.run_due()
        waiting = (await handle.ainfo()).status
        await handle.asend("go", {"n": 1})
        await r.run_due()
        return waiting, await handle.ainfo()

    waiting, info = asyncio.run(main())
    assert waiting == "waiting" and info.status == "completed" and info.result == {"n": 1}
