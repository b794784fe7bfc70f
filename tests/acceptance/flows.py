"""Workflows for the acceptance tests. Steps log each execution to a file (ACCEPTANCE_DIR), so
the test can count how often each step really ran across process kills."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from workflows import Loop, event, queue, setup, workflow


def _dir() -> Path:
    return Path(os.environ["ACCEPTANCE_DIR"])


def log(run_key: str, step: str) -> None:
    with open(_dir() / "ledger.log", "a") as f:  # O_APPEND: whole lines, even from two processes
        f.write(f"{run_key} {step}\n")


async def _blocking(step):
    """Logs that it started, then waits until the test creates the file 'release'."""
    log(step.key[0], f"{step.name}:start")
    while not (_dir() / "release").exists():  # noqa: ASYNC110 - the signal comes from another process
        await asyncio.sleep(0.02)
    log(step.key[0], f"{step.name}:end")
    return "released"


async def crash_body(ctx):
    a = await ctx.step("one", lambda s: log(s.key[0], "one") or 1)
    b = await ctx.step("two", lambda s: log(s.key[0], "two") or 2)
    c = await ctx.step("block", _blocking)
    d = await ctx.step("four", lambda s: log(s.key[0], "four") or 4)
    return [a, b, c, d]


async def _logged(step):
    log(step.key[0], step.name)
    return step.name


async def many_body(ctx):
    for name in ("s1", "s2", "s3"):
        await ctx.step(name, _logged)
    return "done"


async def join_body(ctx):
    async def quick(c):
        return await c.step("a1", _logged)

    async def slow(c):
        return await c.step("b-block", _blocking)

    return await ctx.join("fan", {"quick": quick, "slow": slow})


async def loop_body(ctx):
    async def iteration(c, n):
        await c.step(f"it{n}", _logged)
        if n == 3:
            await c.step("it-block", _blocking)
        return Loop.done(n) if n == 5 else Loop.next(n + 1)

    return await ctx.loop("iterate", iteration, state=0, history_size=2)


async def rollback_body(ctx):
    await ctx.rollback_checkpoint("cp")
    await ctx.step("reserve", _logged, rollback=_undo_blocking)
    await ctx.step("charge", _logged, rollback=_undo)
    raise RuntimeError("shipping failed")


async def _undo(step, output):
    log(step.key[0], f"undo-{step.name}")


async def _undo_blocking(step, output):
    await _blocking(step)
    log(step.key[0], f"undo-{step.name}")


async def race_body(ctx):
    async def work(c):
        return await c.step("r-block", _blocking)

    async def reply(c):
        return (await c.queue.next("wait", names=["reply"])).body

    result = await ctx.race("first", {"work": work, "reply": reply})
    return result.winner


async def _quick_logged(step):
    await asyncio.sleep(0.005)
    log(step.key[0], step.name)
    return step.name


def _publish(step):
    """An external call that honours an idempotency key, as the demo CMS does: a repeat with the
    same key creates no second post. The ledger counts calls and posts apart."""
    key = step.key[0]
    log(key, "publish-call")
    posts = _dir() / "posts"
    posts.mkdir(exist_ok=True)
    try:
        os.close(os.open(posts / key, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return key
    log(key, "post-created")
    return key


async def blink_body(ctx):
    """Four quick steps and a publish: what the database-blink tests run by the dozen."""
    for name in ("extract", "enrich", "summarize", "review"):
        await ctx.step(name, _quick_logged)
    await ctx.step("publish", _publish)
    ctx.state["stage"] = "published"
    return "published"


async def _announce_then_block(step):
    step.broadcast("progress", {"stage": "published"})
    return await _blocking(step)


async def announce_body(ctx):
    return await ctx.step("publish", _announce_then_block)


async def parent_body(ctx):
    """Starts a `crash` run as its child (the child blocks until released) and takes its result."""
    await ctx.step("p1", _logged)
    result = await ctx.child("kid", "crash", [ctx.key[0] + "-kid"])
    await ctx.step("p2", _logged)
    return result


registry = setup(
    use={
        "parent": workflow(parent_body),
        "announce": workflow(announce_body, events={"progress": event()}),
        "blink": workflow(blink_body, state=lambda: {"stage": "queued"}),
        "crash": workflow(crash_body),
        "many": workflow(many_body),
        "join": workflow(join_body),
        "loop": workflow(loop_body),
        "rollback": workflow(rollback_body),
        "race": workflow(race_body, queues={"reply": queue()}),
    }
)
