"""A start's `together=` statements (the caller's own rows, written in the start's transaction or
not at all), and a web process's default store on PostgreSQL (`DjangoThreadLoop`): async starts
from the event loop on connections of its own, Django's thread when every one is busy or a
statement is refused, and `POST /jobs` through it end to end."""

from __future__ import annotations

import asyncio
import functools
import json
import time

import psycopg
import pytest
from django.db import IntegrityError, connection

from jobs.models import IdempotencyKey, JobOwner
from workflows import BadInput, RunNotFound, conf, setup, workflow
from workflows.http.auth import create_api_key
from workflows.models import Message, Run
from workflows.storage.django import DjangoStore
from workflows.storage.django.loop_connection import dropped
from workflows.storage.django.loop_connectors import DjangoThreadLoop
from workflows.storage.django.notify import _libpq_params

pytestmark = pytest.mark.django_db(transaction=True)  # the store's own connections see the rows

PG = connection.vendor == "postgresql"
only_pg = pytest.mark.skipif(not PG, reason="the event loop's connections are PostgreSQL's")


async def _noop(ctx):
    return None


registry = setup(use={"wf": workflow(_noop)})
PROBE = "INSERT INTO together_probe (name) VALUES (%s)"


@pytest.fixture(autouse=True)
def probe_table():
    """A table of the caller's own, with a unique column a statement can collide on."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE together_probe (name varchar(50) PRIMARY KEY)")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE together_probe")


def probes() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM together_probe ORDER BY name")
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def loop_store():
    """A web process's default store, with one connection of its own."""
    store = DjangoStore(connector=functools.partial(DjangoThreadLoop, size=1))
    yield store
    store.close()


def test_together__written_in_the_start_s_transaction():
    handle = registry.client("wf", store=DjangoStore()).get_or_create(["a"], together=[(PROBE, ["a"])])
    assert handle.created and Run.objects.filter(key=["a"]).exists()
    assert probes() == ["a"]


def test_together__a_statement_that_fails_leaves_nothing_written():
    client = registry.client("wf", store=DjangoStore())
    client.get_or_create(["a"], together=[(PROBE, ["taken"])])
    with pytest.raises(IntegrityError):
        client.get_or_create(["b"], together=[(PROBE, ["fresh"]), (PROBE, ["taken"])])
    assert not Run.objects.filter(key=["b"]).exists()
    assert probes() == ["taken"]  # "fresh", before the failing one, went with it


def test_together__not_with_replace_or_debounce():
    client = registry.client("wf", store=DjangoStore())
    for options in ({"on_conflict": "replace"}, {"debounce": 5.0}):
        with pytest.raises(BadInput, match="together="):
            client.get_or_create(["a"], together=[(PROBE, ["a"])], **options)
    assert not Run.objects.exists() and probes() == []


@only_pg
def test_an_async_start_goes_from_the_loop_in_one_call_with_its_together_rows(loop_store):
    client = registry.client("wf", store=loop_store)
    handle = asyncio.run(client.aget_or_create(["a"], message=None, together=[(PROBE, ["a"])]))
    assert handle.created and loop_store.connector.reads.calls == 1
    assert loop_store.connector.reads.statements == 2  # the probe and the run, one round trip
    assert str(Run.objects.get(key=["a"]).id) == handle.run_id and probes() == ["a"]


@only_pg
def test_an_async_start_whose_together_row_collides_writes_nothing_and_raises(loop_store):
    client = registry.client("wf", store=loop_store)
    asyncio.run(client.aget_or_create(["a"], together=[(PROBE, ["taken"])]))
    with pytest.raises(IntegrityError):  # refused on the loop, then raised by Django's thread
        asyncio.run(client.aget_or_create(["b"], together=[(PROBE, ["taken"])]))
    assert loop_store.connector.reads.refused == 1
    assert not Run.objects.filter(key=["b"]).exists() and probes() == ["taken"]


@only_pg
def test_an_async_start_of_a_taken_key_answers_its_run_with_the_together_rows_written(loop_store):
    client = registry.client("wf", store=loop_store)
    first = asyncio.run(client.aget_or_create(["a"]))
    again = asyncio.run(client.aget_or_create(["a"], together=[(PROBE, ["second"])]))
    assert not again.created and again.run_id == first.run_id
    assert probes() == ["second"] and Run.objects.count() == 1


@only_pg
def test_an_async_read_by_key_goes_from_the_loop(loop_store):
    client = registry.client("wf", store=loop_store)
    made = asyncio.run(client.aget_or_create(["a"]))
    assert asyncio.run(client.aget(["a"])).run_id == made.run_id
    with pytest.raises(RunNotFound):
        asyncio.run(client.aget(["missing"]))
    assert loop_store.connector.reads.calls == 3


@only_pg
def test_while_every_loop_connection_is_busy_a_start_goes_through_django_s_thread(loop_store):
    client = registry.client("wf", store=loop_store)

    async def both():
        return await asyncio.gather(client.aget_or_create(["a"]), client.aget_or_create(["b"]))

    handles = asyncio.run(both())
    assert all(h.created for h in handles) and Run.objects.count() == 2
    assert loop_store.connector.reads.calls == 1  # the other one took the thread


@only_pg
def test_a_loop_connection_the_server_dropped_while_idle_is_replaced_before_use(loop_store):
    """As after a database restart: the next start opens a new connection instead of failing."""
    client = registry.client("wf", store=loop_store)

    async def go():
        await client.aget_or_create(["a"])
        conn = loop_store.connector.reads.connection.current
        pid = conn.info.backend_pid
        with psycopg.connect(**_libpq_params(), autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        deadline = time.monotonic() + 10
        while not dropped(conn):  # the server's notice reaches the socket
            assert time.monotonic() < deadline, "the terminated connection never read"
            await asyncio.sleep(0.01)
        handle = await client.aget_or_create(["b"])
        after = loop_store.connector.reads.connection.current
        return pid, handle, after.info.backend_pid

    before, handle, after = asyncio.run(go())
    assert handle.created and after != before
    assert Run.objects.count() == 2 and loop_store.connector.reads.calls == 2


@only_pg
def test_the_default_store_takes_its_loop_connections_from_the_setting(settings):
    for size, connector in ((3, DjangoThreadLoop), (0, None)):
        settings.WORKFLOWS = {**settings.WORKFLOWS, "ASYNC_CONNECTIONS": size}
        conf.default_store.cache_clear()
        try:
            store = conf.default_store()
            if connector is None:
                assert not store.connector.reads_here
            else:
                assert isinstance(store.connector, connector) and len(store.connector.reads.connections) == 3
        finally:
            store.close()
            conf.default_store.cache_clear()


@only_pg
def test_post_jobs_through_the_loop__a_job_once_per_idempotency_key(settings, async_client):
    """The example's async view on a store with loop connections, as a web server runs it."""
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "REGISTRIES": ["jobs.workflows.registry"],
        "ASYNC_CONNECTIONS": 2,
    }
    conf.registry.cache_clear()
    conf.default_store.cache_clear()
    body = {"title": "Call", "transcript": "Acme Corp called."}

    async def post(data, key):
        return await async_client.post(
            "/jobs", data=json.dumps(data), content_type="application/json", headers={"Idempotency-Key": key}
        )

    async def scenario():
        first = await post(body, "k1")
        repeat = await post(body, "k1")
        other = await post({**body, "title": "Other"}, "k1")
        reads = conf.default_store().connector.reads
        return first, repeat, other, (reads.calls, reads.refused)

    try:
        first, repeat, other, reads = asyncio.run(scenario())
    finally:
        conf.default_store().close()
        conf.default_store.cache_clear()
        conf.registry.cache_clear()
    assert (first.status_code, repeat.status_code, other.status_code) == (202, 202, 422), other.content
    assert repeat.json()["jobId"] == first.json()["jobId"]
    assert reads == (1, 2)  # each went to the loop first; the repeats were refused there
    run = Run.objects.get(workflow="aiJob")
    assert run.key == [first.json()["jobId"]] and Message.objects.filter(run=run).count() == 1
    assert IdempotencyKey.objects.get(key="k1").job_id.hex == first.json()["jobId"].replace("-", "")


@only_pg
def test_post_jobs_through_the_loop__a_tenant_s_job_has_its_owner_row_in_the_same_call(
    settings, async_client
):
    """With JOBS_REQUIRE_API_KEY, the owner's row goes with the key's and the run's, from the loop."""
    settings.JOBS_REQUIRE_API_KEY = True
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "REGISTRIES": ["jobs.workflows.registry"],
        "ASYNC_CONNECTIONS": 2,
    }
    conf.registry.cache_clear()
    conf.default_store.cache_clear()
    _row, key = create_api_key("tenant")

    async def scenario():
        response = await async_client.post(
            "/jobs",
            data=json.dumps({"title": "Call", "transcript": "Acme Corp called."}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {key}", "Idempotency-Key": "t1"},
        )
        return response, conf.default_store().connector.reads.statements

    try:
        response, statements = asyncio.run(scenario())
    finally:
        conf.default_store().close()
        conf.default_store.cache_clear()
        conf.registry.cache_clear()
    assert response.status_code == 202, response.content
    assert statements == 3  # the key, the owner and the run, in one call
    job_id = response.json()["jobId"]
    assert str(JobOwner.objects.get().job_id) == job_id
    assert str(IdempotencyKey.objects.get(key="t1").job_id) == job_id
