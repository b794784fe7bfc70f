"""A claim's read-ahead of its runs' history (PostgreSQL, from the runner's event loop): a run that
ran before resumes from its real history whatever the claiming runner's clock says, also when
that clock is behind the run's first start or stands still (issue: such a claim read no history,
the run replayed from nothing and failed to insert its first entry again)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from django.db import connection

from tests.support import a_step, now
from workflows.core.new_run import NewRun
from workflows.models import Run
from workflows.storage.django import DjangoStore

pytestmark = [
    pytest.mark.django_db(transaction=True),  # the store's own connections must see the rows
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the read-ahead is PostgreSQL's"),
]


@pytest.fixture
def store(runner_store):
    return runner_store


@pytest.mark.parametrize("behind", [120.0, 0.0], ids=["claimant-120s-behind", "clock-standing-still"])
def test_a_run_that_ran_before_resumes_from_its_history(store, behind):
    first_start = now()
    run_id = (
        DjangoStore()
        .get_or_create_run(
            NewRun(
                workflow="wf",
                key=["k"],
                version="v",
                initial_state={},
                now=first_start - dt.timedelta(seconds=600),
            )
        )[0]
        .id
    )
    DjangoStore().claim(owner="a", workflows=["wf"], limit=1, lease_seconds=30, now=first_start)
    for position in range(3):
        DjangoStore().commit(run_id=run_id, owner="a", commit=a_step(position), now=first_start)
    claimant_now = first_start - dt.timedelta(seconds=behind)
    # The run waits (released, as by a stopping runner) and is due by the claimant's clock.
    Run.objects.filter(id=run_id).update(
        status="pending", lease_owner="", wake_at=claimant_now - dt.timedelta(seconds=1)
    )

    async def claim_and_resume():
        runs = await store.aclaim(owner="b", workflows=["wf"], limit=1, lease_seconds=30, now=claimant_now)
        return runs, await store.aload_resume(run_id)

    [run], (history, _messages) = asyncio.run(claim_and_resume())
    assert store.connector.reads.calls >= 1  # the claim and its read-ahead went from the loop
    assert not run.fresh and not run.taken_over
    assert [entry.position for entry in history] == [0, 1, 2]
