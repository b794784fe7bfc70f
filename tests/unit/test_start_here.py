"""`Runner.start` over the real store, which creates runs held by the runner: a run started here
executes at once without a claim, and never beyond the runner's concurrency, a claim in flight
included (its free slots are the claim's)."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from workflows import queue, setup, workflow
from workflows.core.clock import FakeClock
from workflows.engine.runner import Runner
from workflows.storage.django import DjangoStore

STARTED: list[str] = []


async def quick(ctx):
    await ctx.step("one", lambda s: STARTED.append(ctx.key[0]) or 1)
    return ctx.key[0]


async def blocked(ctx):
    await ctx.step("hold", lambda s: STARTED.append(ctx.key[0]) or 1)
    await GATE.wait()  # holds its slot until the test opens the gate
    return "released"


async def waits(ctx):
    message = await ctx.queue.next("wait", names=["go"])
    return message.body


pytestmark = pytest.mark.usefixtures("engine_db")

GATE = asyncio.Event()
REGISTRY = setup(
    use={
        "quick": workflow(quick),
        "blocked": workflow(blocked),
        "waits": workflow(waits, queues={"go": queue()}),
    }
)


class ClaimCounting(DjangoStore):
    def __init__(self) -> None:
        super().__init__()
        self.claims = 0
        self.claim_gate: asyncio.Event | None = None  # set: claims wait for it

    async def aclaim(self, **kwargs):
        self.claims += 1
        if self.claim_gate is not None:
            await self.claim_gate.wait()
        return await super().aclaim(**kwargs)


def make(concurrency: int = 5) -> tuple[ClaimCounting, Runner]:
    global GATE
    GATE = asyncio.Event()
    STARTED.clear()
    store = ClaimCounting()
    clock = FakeClock(dt.datetime(2030, 1, 1, tzinfo=dt.UTC))
    return store, Runner(registry=REGISTRY, store=store, clock=clock, concurrency=concurrency, watch=False)


def test_a_run_started_here_executes_at_once_without_a_claim():
    async def main():
        store, runner = make()
        handle = await runner.start("quick", ["a"])
        assert handle.run_id in runner._tasks
        await runner.executed(handle.run_id)
        return store, await handle.ainfo()

    store, info = asyncio.run(main())
    assert info.status == "completed" and info.result == "a" and store.claims == 0
    assert STARTED == ["a"]


def test_a_full_runner_leaves_the_run_to_a_claim():
    async def main():
        _store, runner = make(concurrency=1)
        first = await runner.start("blocked", ["b1"])
        second = await runner.start("quick", ["b2"])
        executing = set(runner._tasks)
        status = (await second.ainfo()).status
        GATE.set()
        await runner.executed(first.run_id)
        await runner.run_due()
        return first, executing, status, await second.ainfo()

    first, executing, status, info = asyncio.run(main())
    assert executing == {first.run_id} and status == "pending"
    assert info.status == "completed" and STARTED == ["b1", "b2"]


def test_a_claim_in_flight_keeps_its_free_slots():
    async def main():
        store, runner = make(concurrency=1)
        waiting = await runner.start("waits", ["w"])
        await runner.executed(waiting.run_id)  # suspended: no slot held
        await waiting.asend("go", {"n": 1})  # due again: the next claim takes it
        store.claim_gate = asyncio.Event()
        claim = asyncio.create_task(runner._claim())
        await asyncio.sleep(0)  # the claim is in flight, counting on the one free slot
        started = await runner.start("quick", ["c"])
        not_held = started.run_id not in runner._tasks
        store.claim_gate.set()
        await claim
        most = len(runner._tasks)
        await runner.run_due()
        return not_held, most, await waiting.ainfo(), await started.ainfo()

    not_held, most, waited, quick_run = asyncio.run(main())
    assert not_held and most == 1  # never more runs at once than the runner's concurrency
    assert waited.status == "completed" and waited.result == {"n": 1}
    assert quick_run.status == "completed"


def test_a_key_that_has_a_run_is_not_started_again():
    async def main():
        _store, runner = make()
        first = await runner.start("quick", ["d"])
        await runner.executed(first.run_id)
        again = await runner.start("quick", ["d"])
        return first, again, set(runner._tasks)

    first, again, executing = asyncio.run(main())
    assert again.run_id == first.run_id and not again.created and executing == set()
    assert STARTED == ["d"]
