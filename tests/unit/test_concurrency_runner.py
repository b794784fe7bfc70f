"""The runner with concurrency groups: it executes a group's runs as slots free, and `--until-idle`
neither busy-loops claiming nor waits forever when the only due runs sit in groups that are full."""

from __future__ import annotations

import asyncio
import datetime as dt

from workflows import Concurrency, setup, workflow
from workflows.core.clock import Clock
from workflows.engine.runner import Runner
from workflows.storage.django import DjangoStore


class CountingClaims(DjangoStore):
    claims = 0
    wake_reads = 0

    def claim(self, **kwargs):
        self.claims += 1
        return super().claim(**kwargs)

    def next_wake_at(self, **kwargs):
        self.wake_reads += 1
        return super().next_wake_at(**kwargs)


def _registry(max_: int, spans: list[tuple[str, float, float]] | None = None):
    async def body(ctx):
        async def work(step):
            loop = asyncio.get_running_loop()
            start = loop.time()
            await asyncio.sleep(0.05)
            if spans is not None:
                spans.append((ctx.key[0], start, loop.time()))
            return "ok"

        return await ctx.step("work", work)

    return setup(use={"wf": workflow(body, concurrency=Concurrency(max=max_, key=lambda run: run.key[0]))})


def _peak(spans: list[tuple[str, float, float]], group: str) -> int:
    edges = sorted(
        [(s, 1) for g, s, _e in spans if g == group] + [(e, -1) for g, _s, e in spans if g == group]
    )
    inside = peak = 0
    for _at, step in edges:  # an end before a start at the same instant: -1 sorts first
        inside += step
        peak = max(peak, inside)
    return peak


async def test_runner__executes_each_group_at_most_max_at_once_and_finishes_everything(django_store):
    store, spans = django_store, []
    reg = _registry(2, spans)
    client = reg.client("wf", store=store)
    ids = [client.get_or_create([g, str(i)]).run_id for g in ("acme", "beta") for i in range(6)]
    runner = Runner(registry=reg, store=store, concurrency=10, watch=False)
    await asyncio.wait_for(runner.run(until_idle=True), 20)
    assert [store.get_run(rid).status for rid in ids] == ["completed"] * len(ids)
    assert _peak(spans, "acme") == 2 and _peak(spans, "beta") == 2


async def test_until_idle__does_not_busy_loop_on_runs_held_in_a_full_group(engine_db):
    store = CountingClaims()
    reg = _registry(1)
    client = reg.client("wf", store=store)
    for i in range(3):
        client.get_or_create(["acme", str(i)])
    # Another runner holds the group's only slot (for the lease's 30 s): the rest must wait.
    [held] = store.claim(
        owner="elsewhere", workflows=["wf"], limit=5, lease_seconds=30, now=Clock().now(),
        concurrency=reg.concurrency_caps(),
    )  # fmt: skip
    runner = Runner(registry=reg, store=store, concurrency=4, watch=False)
    await asyncio.wait_for(runner.run(until_idle=True), 5)
    # Idle at once: nothing it may run is due before the holder's lease could lapse.
    assert store.claims <= 2 and store.wake_reads <= 2
    assert [store.find_run("wf", ["acme", str(i)]).status for i in range(3)] == [
        "running",
        "pending",
        "pending",
    ]
    assert held.key == ["acme", "0"]


async def test_runner__waits_while_its_own_runs_hold_the_slots_and_takes_the_next_as_one_ends(engine_db):
    store, spans = CountingClaims(), []
    reg = _registry(1, spans)
    client = reg.client("wf", store=store)
    for i in range(4):
        client.get_or_create(["acme", str(i)])
    runner = Runner(registry=reg, store=store, concurrency=4, watch=False)
    await asyncio.wait_for(runner.run(until_idle=True), 10)
    assert [store.find_run("wf", ["acme", str(i)]).status for i in range(4)] == ["completed"] * 4
    assert _peak(spans, "acme") == 1
    # One claim per slot that freed, give or take a couple: no polling while a run is executing.
    assert store.claims <= 4 + 3


async def test_runner__a_lapsed_lease_frees_the_slot_for_an_idle_runner(django_store):
    store = django_store
    reg = _registry(1)
    client = reg.client("wf", store=store)
    for i in range(2):
        client.get_or_create(["acme", str(i)])
    past = Clock().now() - dt.timedelta(seconds=60)
    store.claim(owner="crashed", workflows=["wf"], limit=5, lease_seconds=1, now=past, concurrency={"wf": 1})
    runner = Runner(registry=reg, store=store, concurrency=4, watch=False)
    await asyncio.wait_for(runner.run(until_idle=True), 10)
    assert [store.find_run("wf", ["acme", str(i)]).status for i in range(2)] == ["completed"] * 2
