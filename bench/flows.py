"""The benchmark's workflows (WORKFLOWS_REGISTRIES=bench.flows.registry for runner processes).

Every step is trivial (returns a small int or a timestamp) so the figures measure the engine:
history, commit, claim and wake-up, not user work.
"""

from __future__ import annotations

import asyncio
import time

from workflows import queue, setup, workflow

# Filled by `overhead` when it runs in the bench process: (direct call, recorded step) seconds.
TIMINGS: list[tuple[float, float]] = []


async def trivial(step):
    return 7


async def stamp(step):
    """The wall-clock time the step body started (compared with the sender's clock)."""
    return time.time()


async def overhead_body(ctx):
    """Per-step overhead: `int(key[1])` recorded steps, each timed beside a direct call of the
    same function (in-process only: the timings land in TIMINGS)."""
    clock = time.perf_counter
    for i in range(int(ctx.key[1])):
        t0 = clock()
        await trivial(None)
        t1 = clock()
        await ctx.step(f"s{i}", trivial)
        t2 = clock()
        TIMINGS.append((t1 - t0, t2 - t1))
    return len(TIMINGS)


async def ten_body(ctx):
    total = 0
    for i in range(10):
        total += await ctx.step(f"s{i}", trivial)
    return total


async def waiter_body(ctx):
    """Waits for `start`, then its first step records when it began."""
    await ctx.queue.next("wait-start", names=["start"])
    return await ctx.step("first", stamp)


async def stream_body(ctx):
    """One step writes `n` tokens to its stream, `pace` seconds apart (0: as fast as it can);
    with `stream` False it does the same work without writing (the baseline)."""
    spec = ctx.key

    async def write(step):
        n, pace, streaming = int(spec[0]), float(spec[1]), spec[2] == "stream"
        t0 = time.perf_counter()
        for i in range(n):
            if streaming:
                await step.stream.write(f"tok{i} ")
            if pace:
                await asyncio.sleep(pace)
        return time.perf_counter() - t0

    return await ctx.step("write", write)


registry = setup(
    use={
        "bench_stream": workflow(stream_body),
        "bench_overhead": workflow(overhead_body),
        "bench_ten": workflow(ten_body),
        "bench_waiter": workflow(waiter_body, queues={"start": queue()}),
    }
)
