"""The bed's workflows. Every step body appends to a ledger file shared by all hosts (the
namespaces share this machine's file system), so the test sees who ran what, when, from outside
the engine. One line per write, O_APPEND: lines from several processes never interleave.

    B <run> <step> <host> <pid> <mono> <wall>        a step body began
    E <run> <step> <host> <pid> <mono-begin> <mono>   it ended or was cancelled (none: killed)
    X <run> <step> <host> <pid> <mono>               its side effect happened
    G <run> <step> <host> <pid> <mono>               the workflow body paused before that step

`mono` is time.monotonic(): one clock for every namespace of the machine, and libfaketime leaves
it alone (FAKETIME_DONT_FAKE_MONOTONIC=1); `wall` is time.time() as the runner sees it (faked),
so the test can prove each runner's skew. <run> is the run's key joined with "/".
"""

from __future__ import annotations

import asyncio
import os
import time

from workflows import Concurrency, Limiter, schedule, setup, workflow

LIMIT = Limiter("mh-limit", requests_per_minute=8, concurrency=2)
GROUP_MAX = 2


def host() -> str:
    return os.environ.get("WFMH_HOST", "?")


def write(kind: str, run: str, step: str, *times: float) -> None:
    line = " ".join([kind, run, step, host(), str(os.getpid()), *(f"{t:.6f}" for t in times)]) + "\n"
    fd = os.open(os.environ["WFMH_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def run_name(key: list[str] | tuple[str, ...]) -> str:
    return "/".join(key)


async def _body(run: str, step: str, seconds: float, effect: bool = False) -> str:
    began = time.monotonic()
    write("B", run, step, began, time.time())
    try:
        await asyncio.sleep(seconds)
        if effect:
            write("X", run, step, time.monotonic())
    finally:  # also when cancelled (a lost lease): the body stopped here
        write("E", run, step, began, time.monotonic())
    return step


async def chain_body(ctx):
    """`steps` steps of `work` seconds each, the last with a side effect. On a host named in
    `gap_hosts` the workflow body waits `gap` seconds before each step named in `gap_before` (all
    by default), outside any step: a runner frozen or cut off there starts that step the moment
    the wait ends, unless it checks its lease first. Only those hosts wait: a takeover elsewhere
    replays and goes on at full speed."""
    run = run_name(ctx.key)
    params = ctx.state
    steps = int(params.get("steps", 3))
    for i in range(steps):
        name = f"s{i}"
        if (
            params.get("gap")
            and host() in params.get("gap_hosts", [])
            and name in params.get("gap_before", [name])
        ):
            write("G", run, name, time.monotonic())
            await asyncio.sleep(float(params["gap"]))
        last = i == steps - 1
        await ctx.step(name, lambda s, n=name, e=last: _body(run, n, float(params.get("work", 0.1)), e))
    return "done"


async def grouped_body(ctx):
    run = run_name(ctx.key)
    return await ctx.step("slot", lambda s: _body(run, "slot", 0.3, True))


async def limited_body(ctx):
    run = run_name(ctx.key)
    return await ctx.step("call", lambda s: _body(run, "call", 0.3, True), limit=LIMIT.name)


registry = setup(
    use={
        "chain": workflow(chain_body, state=lambda: {"steps": 3, "work": 0.1}),
        "grouped": workflow(grouped_body, concurrency=Concurrency(max=GROUP_MAX, key=lambda run: run.key[0])),
        "limited": workflow(limited_body),
    },
    limiters=[LIMIT],
)


async def tick_body(ctx):
    fire_time = ctx.state["$schedule"]["fire_time"]
    return await ctx.step("tick", lambda s: _body(fire_time, "tick", 0.05, True))


# Its own registry: runners of the other tests must not fire it.
cron_registry = setup(
    use={"tick": workflow(tick_body)}, schedules=[schedule("* * * * * */2", "tick", catch_up="all")]
)
