"""A run started with its first message (`get_or_create(message=(queue, body))`, as POST /jobs
starts a job): the run and the message are stored together or not at all, in one statement on
PostgreSQL; a key that already has a run gets no message; a bad message writes nothing; a
debounced start still waits; a replacing start gives the message to the new run only. On the
database (SQLite, or PostgreSQL with DATABASE_URL)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from workflows import BadInput, queue, setup, workflow
from workflows.core.new_run import NewRun
from workflows.core.records import OutgoingMessage
from workflows.engine.client import WorkflowClient
from workflows.models import Message, Run
from workflows.storage.django import DjangoStore
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

PG = connection.vendor == "postgresql"


async def _takes_its_start(ctx):
    message = await ctx.queue.next("wait-start", names=["start"])
    return message.body


REGISTRY = setup(use={"wf": workflow(_takes_its_start, queues={"start": queue()})})


@pytest.fixture
def store():
    return DjangoStore()


def _client(store) -> WorkflowClient:
    return REGISTRY.client("wf", store=store)


def _messages(store, run_id: str) -> list[tuple[str, object]]:
    """(queue, body) of the run's messages, oldest first."""
    return list(Message.objects.filter(run_id=run_id).order_by("id").values_list("queue", "body"))


def _all_messages(store) -> int:
    return Message.objects.count()


def _all_runs(store) -> int:
    return Run.objects.count()


def test_the_run_and_its_first_message_are_stored_together_and_the_run_takes_it(store):
    handle = _client(store).get_or_create(["a"], message=("start", {"n": 1}))
    assert handle.created
    assert _messages(store, handle.run_id) == [("start", {"n": 1})]
    run = handle.info()
    assert run.status == "pending" and run.wake_at == run.created_at  # due at once
    run_until_idle(REGISTRY, store=store)
    assert (handle.info().status, handle.info().result) == ("completed", {"n": 1})


@pytest.mark.skipif(not PG, reason="the one-statement start is PostgreSQL's")
def test_on_postgresql_the_run_and_its_message_are_one_statement():
    store = DjangoStore()
    store.shared_clock.refresh()  # the database's time, read at most once a minute: not now
    with CaptureQueriesContext(connection) as queries:
        handle = _client(store).get_or_create(["a"], message=("start", [1, "two"]))
    [statement] = [q["sql"] for q in queries.captured_queries]
    assert "INSERT INTO workflows_message" in statement and "INSERT INTO workflows_run" in statement
    assert _messages(None, handle.run_id) == [("start", [1, "two"])]


def test_a_key_that_already_has_a_run_gets_no_message(store):
    first = _client(store).get_or_create(["a"])
    again = _client(store).get_or_create(["a"], message=("start", {"n": 2}))
    assert not again.created and again.run_id == first.run_id
    assert _all_messages(store) == 0


@pytest.mark.parametrize(
    "message, says",
    [
        (("nope", {}), "nope"),  # no such queue
        (("start", {"x": object()}), "JSON"),  # a body that cannot be stored
        (("start",), "pair"),
        ("start", "pair"),
        ((1, {}), "pair"),
    ],
)
def test_a_bad_message_writes_nothing(store, message, says):
    with pytest.raises(BadInput, match=says):
        _client(store).get_or_create(["a"], message=message)
    assert (_all_runs(store), _all_messages(store)) == (0, 0)


def test_a_debounced_start_keeps_its_wait_with_its_message(store):
    before = dt.datetime.now(dt.UTC)
    handle = _client(store).get_or_create(["a"], debounce=60, message=("start", {"n": 1}))
    assert handle.created and _messages(store, handle.run_id) == [("start", {"n": 1})]
    assert handle.info().wake_at >= before + dt.timedelta(seconds=60)  # the message did not wake it


def test_a_replacing_start_gives_the_message_to_the_new_run_only(store):
    old = _client(store).get_or_create(["a"])
    new = _client(store).get_or_create(["a"], on_conflict="replace", message=("start", {"n": 1}))
    assert new.created and new.run_id != old.run_id
    assert _messages(store, new.run_id) == [("start", {"n": 1})] and _messages(store, old.run_id) == []


@pytest.mark.django_db(transaction=True)  # the runner's own connection sees the rows
@pytest.mark.skipif(not PG, reason="a runner's event-loop connection is PostgreSQL's")
def test_from_a_runners_event_loop_too(runner_store):
    start = {
        "workflow": "wf", "key": ["loop"], "version": "v1", "initial_state": {},
        "now": dt.datetime.now(dt.UTC), "first_message": OutgoingMessage(queue="start", body={"n": 3}),
    }  # fmt: skip
    run, created = asyncio.run(runner_store.aget_or_create_run(NewRun(**start)))
    assert created and runner_store.connector.reads.calls == 1  # one statement, from the loop
    assert _messages(None, run.id) == [("start", {"n": 3})]
