"""A busy runner's claim waits a moment for a few slots (workflows.engine.slots): one claim then
takes several runs; a runner with free capacity claims at once."""

from __future__ import annotations

import asyncio

from workflows.engine import slots


def test_a_quarter_of_the_slots_is_worth_a_claim():
    assert [slots.worth_a_claim(n) for n in (1, 3, 4, 8, 20, 100)] == [1, 1, 1, 2, 5, 25]


async def test_a_runner_with_free_capacity_claims_at_once():
    loop = asyncio.get_running_loop()
    for free in (5, 20, 0):  # a quarter free, all free, none free (nothing to gather)
        started = loop.time()
        await slots.gather(asyncio.Event(), lambda free=free: free, concurrency=20, seconds=30)
        assert loop.time() - started < 5  # not the 30 s it would wait for more


async def test_a_busy_runner_claims_when_enough_slots_freed():
    wake, free = asyncio.Event(), [1]

    async def runs_finishing():
        for _ in range(4):
            await asyncio.sleep(0.01)
            free[0] += 1
            wake.set()

    finishing = asyncio.create_task(runs_finishing())
    await asyncio.wait_for(slots.gather(wake, lambda: free[0], concurrency=20, seconds=30), timeout=10)
    assert free[0] == 5
    await finishing


async def test_a_busy_runner_claims_what_is_free_after_at_most_its_wait():
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    started = loop.time()
    await asyncio.wait_for(slots.gather(wake, lambda: 1, concurrency=20, seconds=0.05), timeout=10)
    assert loop.time() - started >= 0.05
    wake.set()  # a wake that changes nothing looks again, and still ends at the deadline
    await asyncio.wait_for(slots.gather(wake, lambda: 1, concurrency=20, seconds=0.05), timeout=10)
