"""A start answers the run it created without reading it back (on PostgreSQL the statement returns
one column): the record it answers is the one a read of the run gives, in every way a run is
created (the one-statement start, the held start of `Runner.start`, both from a runner's event
loop; SQLite's transactions)."""

from __future__ import annotations

import asyncio
import datetime as dt
from dataclasses import replace

import pytest
from django.db import connection

from workflows.core.new_run import NewRun
from workflows.core.records import RunRecord
from workflows.storage.django import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)  # the store's own connections see the rows

PG = connection.vendor == "postgresql"
STATE = {"n": 1, "nested": {"b": [1, 2.5, None, True], "a": "x"}, "text": "é"}
TRACE = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}


def start(key: str, **extra) -> dict:
    return {
        "workflow": "wf", "key": [key, "two"], "version": "v3", "initial_state": STATE,
        "now": dt.datetime.now(dt.UTC), "trace_context": TRACE, "priority": 7, **extra,
    }  # fmt: skip


def read_back(made: RunRecord) -> RunRecord:
    """The run as a read gives it, with what only a creation or a claim knows set as `made` has
    it (fresh: no history yet; due_at: when a held run became due)."""
    return replace(DjangoStore().get_run(made.id), fresh=made.fresh, due_at=made.due_at)


def test_a_created_run_is_answered_as_it_reads_back():
    store = DjangoStore()
    made, created = store.get_or_create_run(NewRun(**start("a"), concurrency_group="g1"))
    assert created and made.status == "pending" and made.wake_at == made.created_at
    assert made == read_back(made)
    again, created_again = store.get_or_create_run(NewRun(**start("a"), concurrency_group="g1"))
    assert not created_again and again == replace(made, fresh=False)  # the taken key reads it


def test_a_run_created_held_is_answered_as_it_reads_back():
    args = start("h")
    made, created, held = DjangoStore().get_or_create_held_run(NewRun(**args), owner="r1", lease_seconds=30)
    assert created and held
    assert (made.status, made.lease_owner, made.due_at) == ("running", "r1", args["now"])
    assert made.wake_at == args["now"] + dt.timedelta(seconds=30)
    assert made == read_back(made)
    again, created_again, held_again = DjangoStore().get_or_create_held_run(
        NewRun(**args), owner="r2", lease_seconds=30
    )
    assert not created_again and not held_again and again.id == made.id  # the taken key answers its run


@pytest.mark.skipif(not PG, reason="a runner's event-loop connection is PostgreSQL's")
def test_runs_created_from_a_runners_event_loop_are_answered_as_they_read_back(runner_store):
    async def go():
        made = await runner_store.aget_or_create_run(NewRun(**start("loop")))
        held = await runner_store.aget_or_create_held_run(
            NewRun(**start("loop-held")), owner="r2", lease_seconds=30
        )
        return made, held

    (made, created), (held, held_created, is_held) = asyncio.run(go())
    assert runner_store.connector.reads.calls == 2  # both from the loop
    assert created and held_created and is_held and held.lease_owner == "r2"
    assert made == read_back(made) and held == read_back(held)
