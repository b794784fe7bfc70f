"""Workflows for the acceptance tests. Steps log each execution to a file (ACCEPTANCE_DIR), so
the test can count how often each step really ran across process kills."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from workflows import setup, workflow


def _dir() -> Path:
    return Path(os.environ["ACCEPTANCE_DIR"])


def log(run_key: str, step: str) -> None:
    with open(_dir() / "ledger.log", "a") as f:  # O_APPEND: whole lines, even from two processes
        f.write(f"{run_key} {step}\n")


async def _blocking(step):
    """Logs that it started, then waits until the test creates the file 'release'."""
    log(step.key[0], f"{step.name}:start")
    while not (_dir() / "release").exists():
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


registry = setup(use={"crash": workflow(crash_body), "many": workflow(many_body)})
