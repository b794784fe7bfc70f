"""Claims of concurrency groups racing on the real database: claimers in threads (a connection
each) never lease more than `max` runs of a group, and refill freed slots exactly. On PostgreSQL
this holds only because of the per-workflow advisory lock (two claims counting a group at the
same time would both see a free slot); SQLite serialises writers."""

from __future__ import annotations

import datetime as dt
import threading
from collections import Counter

import pytest
from django.db import connections

from workflows import Concurrency, setup, workflow
from workflows.core.records import Commit, RunStatus, Transition
from workflows.models import Run
from workflows.storage.django import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)

GROUPS, PER_GROUP, MAX = 12, 5, 2


async def _noop(ctx):
    return "ok"


registry = setup(use={"wf": workflow(_noop, concurrency=Concurrency(max=MAX, key=lambda run: run.key[0]))})


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _race(claimers: int = 8, limit: int = 3) -> list[str]:
    """Every claimer starts at once and claims until it gets nothing; returns the runs claimed."""
    barrier = threading.Barrier(claimers)
    claimed: list[str] = []
    errors: list[BaseException] = []

    def claim(owner: str) -> None:
        try:
            store = DjangoStore()
            barrier.wait(10)
            while batch := store.claim(
                owner=owner, workflows=["wf"], limit=limit, lease_seconds=60, now=_now(),
                concurrency=registry.concurrency_caps(),
            ):  # fmt: skip
                claimed.extend(r.id for r in batch)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=claim, args=(f"o{i}",)) for i in range(claimers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return claimed


def _running_per_group() -> Counter[str]:
    return Counter(Run.objects.filter(status=RunStatus.RUNNING).values_list("concurrency_group", flat=True))


def test_racing_claims__never_lease_more_than_max_of_a_group():
    client = registry.client("wf", store=DjangoStore())
    for g in range(GROUPS):
        for i in range(PER_GROUP):
            client.get_or_create([f"g{g}", str(i)])
    claimed = _race()
    assert len(claimed) == len(set(claimed)) == GROUPS * MAX
    assert _running_per_group() == {f"wf/g{g}": MAX for g in range(GROUPS)}

    # Every executing run ends: the freed slots refill, exactly, from the runs that waited.
    store = DjangoStore()
    for run in Run.objects.filter(status=RunStatus.RUNNING):
        store.commit(
            run_id=str(run.id), owner=run.lease_owner,
            commit=Commit(transition=Transition(status=RunStatus.COMPLETED, result="ok")), now=_now(),
        )  # fmt: skip
    again = _race()
    assert len(again) == len(set(again)) == GROUPS * MAX
    assert not set(again) & set(claimed)
    assert _running_per_group() == {f"wf/g{g}": MAX for g in range(GROUPS)}


def test_racing_claims__take_the_highest_priority_of_each_group_first():
    client = registry.client("wf", store=DjangoStore())
    for g in range(GROUPS):
        for i in range(PER_GROUP):
            client.get_or_create([f"g{g}", str(i)], priority=10 if i >= PER_GROUP - MAX else 0)
    _race()
    running = Run.objects.filter(status=RunStatus.RUNNING)
    assert running.count() == GROUPS * MAX
    assert set(running.values_list("priority", flat=True)) == {10}


def _complete(run: Run) -> None:
    DjangoStore().commit(
        run_id=str(run.id), owner=run.lease_owner,
        commit=Commit(transition=Transition(status=RunStatus.COMPLETED, result="ok")), now=_now(),
    )  # fmt: skip


def test_held_runs__set_aside_by_a_claim_and_put_back_in_line_one_per_freed_slot():
    one = setup(use={"wf": workflow(_noop, concurrency=Concurrency(max=1))})
    client = one.client("wf", store=DjangoStore())
    for name, priority in (("a", 0), ("b", 0), ("vip", 5), ("c", 0)):
        client.get_or_create([name], priority=priority)
    store, caps = DjangoStore(), one.concurrency_caps()

    def claim() -> list[str]:
        runs = store.claim(
            owner="r", workflows=["wf"], limit=4, lease_seconds=60, now=_now(), concurrency=caps
        )
        return [r.key[0] for r in runs]

    order = claim()
    assert order == ["vip"]
    assert claim() == []  # the group is full: the others are set aside, out of the claim's way
    held = Run.objects.filter(held_at__isnull=False)
    assert sorted(held.values_list("key", flat=True)) == [["a"], ["b"], ["c"]]
    assert not held.filter(wake_at__isnull=False).exists()
    for _ in range(3):
        _complete(Run.objects.get(status=RunStatus.RUNNING))
        assert Run.objects.filter(held_at__isnull=False, wake_at__isnull=True).count() == 3 - len(order)
        order += claim()
    assert order == ["vip", "a", "b", "c"]  # priority first, then FIFO: their place in line kept
    assert Run.objects.filter(held_at__isnull=False).count() == 0


def test_held_runs__slots_freed_at_once_put_back_as_many():
    client = registry.client("wf", store=DjangoStore())
    for i in range(6):
        client.get_or_create(["g", str(i)])
    store, caps = DjangoStore(), registry.concurrency_caps()
    store.claim(owner="r", workflows=["wf"], limit=6, lease_seconds=60, now=_now(), concurrency=caps)
    store.claim(owner="r", workflows=["wf"], limit=6, lease_seconds=60, now=_now(), concurrency=caps)
    assert Run.objects.filter(held_at__isnull=False).count() == 6 - MAX
    running = list(Run.objects.filter(status=RunStatus.RUNNING))
    barrier = threading.Barrier(len(running))

    def complete(run: Run) -> None:
        try:
            barrier.wait(10)
            _complete(run)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=complete, args=(run,)) for run in running]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert Run.objects.filter(status=RunStatus.COMPLETED).count() == MAX
    # Each freed slot put one run back in line: the group runs MAX at once again.
    assert Run.objects.filter(held_at__isnull=False).count() == 6 - 2 * MAX
    again = store.claim(owner="r", workflows=["wf"], limit=6, lease_seconds=60, now=_now(), concurrency=caps)
    assert len(again) == MAX


def test_held_runs__a_starting_runner_puts_back_every_run_set_aside_of_its_workflows_in_place():
    both = setup(use={name: workflow(_noop, concurrency=Concurrency(max=1)) for name in ("wf", "other")})
    for name in ("wf", "other"):
        for i in range(4):
            both.client(name, store=DjangoStore()).get_or_create([str(i)], priority=5 if i == 3 else 0)
    store, caps = DjangoStore(), both.concurrency_caps()
    for _ in range(2):  # the first claim takes one of each group, the second sets the rest aside
        store.claim(
            owner="r", workflows=["wf", "other"], limit=8, lease_seconds=60, now=_now(), concurrency=caps
        )
    held = Run.objects.filter(held_at__isnull=False, wake_at__isnull=True)
    assert held.filter(workflow="wf").count() == held.filter(workflow="other").count() == 3
    due_times = dict(held.filter(workflow="wf").values_list("id", "held_at"))

    assert store.unpark_held(["wf"]) == 3  # one statement; only the workflows named
    assert held.filter(workflow="wf").count() == 0 and held.filter(workflow="other").count() == 3
    assert dict(Run.objects.filter(id__in=due_times).values_list("id", "wake_at")) == due_times

    # Claims at the new max take what the group has room for, then set aside the rest again.
    def claim() -> int:
        runs = store.claim(
            owner="r", workflows=["wf"], limit=8, lease_seconds=60, now=_now(), concurrency={"wf": 3}
        )
        return len(runs)

    assert claim() == 2 and _running_per_group()["wf"] == 3
    assert claim() == 0 and held.filter(workflow="wf").count() == 1
    assert store.unpark_held(["wf"]) == 1 and store.unpark_held(["wf"]) == 0
