"""The Django store's runners' presence: records come and go, a dead runner's leases expire so
that the ordinary claim takes the runs over, due work of other workflows is counted."""

from __future__ import annotations

import datetime as dt

import pytest

from tests.support import now
from workflows.core.new_run import NewRun
from workflows.core.records import RunnerRecord
from workflows.models import Run
from workflows.storage.django import DjangoStore

pytestmark = pytest.mark.django_db


def runner(owner: str, **fields) -> RunnerRecord:
    values = dict(
        owner=owner, host="h1", pid=42, machine="boot/pid:[1]", process_start="123",
        started_at=now(), last_seen=now(), lease_seconds=30.0, concurrency=4,
        workflows={"wf": ["2", "1"]},
    )  # fmt: skip
    return RunnerRecord(**{**values, **fields})


def test_register_touch_list_forget_unregister():
    store = DjangoStore()
    a, b = runner("h1:42:aaaa"), runner("h1:43:bbbb", pid=43, started_at=now() + dt.timedelta(seconds=1))
    store.register_runner(a)
    store.register_runner(b)
    assert [r.owner for r in store.list_runners()] == [a.owner, b.owner]
    assert store.list_runners()[0] == a  # every field round-trips
    store.register_runner(a)  # again (a restart of the same owner): replaced, not doubled
    assert len(store.list_runners()) == 2
    later = now() + dt.timedelta(seconds=5)
    assert store.touch_runner(a.owner, now=later)
    assert store.list_runners()[0].last_seen == later
    assert not store.touch_runner("nobody", now=later)
    assert store.forget_runners(seen_before=later) == 1  # b was last seen before
    assert [r.owner for r in store.list_runners()] == [a.owner]
    store.unregister_runner(a.owner)
    store.unregister_runner(a.owner)  # gone already: nothing to do
    assert store.list_runners() == []


def test_expire_leases__the_claim_then_takes_the_runs_over_as_lapsed():
    store = DjangoStore()
    t0 = now()
    for key in ("a", "b"):
        store.get_or_create_run(NewRun(workflow="wf", key=[key], version="", initial_state={}, now=t0))
    store.get_or_create_run(NewRun(workflow="wf", key=["c"], version="", initial_state={}, now=t0))
    held = store.claim(owner="dead", workflows=["wf"], limit=2, lease_seconds=300, now=t0)
    store.claim(owner="alive", workflows=["wf"], limit=1, lease_seconds=300, now=t0)
    assert store.claim(owner="new", workflows=["wf"], limit=5, lease_seconds=30, now=t0) == []
    lapsed = t0 + dt.timedelta(seconds=1)
    assert store.expire_leases("dead", lapsed_at=lapsed, now=t0 + dt.timedelta(seconds=2)) == 2
    assert store.expire_leases("dead", lapsed_at=lapsed, now=t0 + dt.timedelta(seconds=2)) == 0  # done
    taken = store.claim(
        owner="new", workflows=["wf"], limit=5, lease_seconds=30, now=t0 + dt.timedelta(seconds=2)
    )
    assert sorted(r.id for r in taken) == sorted(r.id for r in held)  # not the live runner's run
    assert all(r.taken_over and r.previous_owner == "dead" and r.lease_lapsed_at == lapsed for r in taken)
    assert Run.objects.filter(lease_owner="alive").count() == 1


def test_due_elsewhere__counts_due_runs_of_other_workflows():
    store = DjangoStore()
    t0 = now()
    for workflow, key in (("wf", "a"), ("orphan", "a"), ("orphan", "b"), ("later", "a")):
        store.get_or_create_run(NewRun(workflow=workflow, key=[key], version="", initial_state={}, now=t0))
    Run.objects.filter(workflow="later").update(wake_at=t0 + dt.timedelta(hours=1), status="waiting")
    assert store.due_elsewhere(["wf"], now=t0) == {"orphan": 2}
    assert store.due_elsewhere(["wf", "orphan"], now=t0) == {}
    assert store.due_elsewhere([], now=t0 + dt.timedelta(hours=2)) == {"later": 1, "orphan": 2, "wf": 1}
