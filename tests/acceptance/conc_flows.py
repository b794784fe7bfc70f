"""A workflow limited to 2 runs at once, for the acceptance test of concurrency groups across
runner processes: each run's step logs when it started and ended (and in which process) to the
ledger (ACCEPTANCE_DIR), so the test can prove how many ever overlapped."""

from __future__ import annotations

import asyncio
import os
import time

from workflows import Concurrency, setup, workflow

from .flows import log

WORK_SECONDS = 0.3


async def slot_body(ctx):
    async def work(step):
        log(ctx.key[0], f"start {time.time():.6f} {os.getpid()}")
        await asyncio.sleep(WORK_SECONDS)
        log(ctx.key[0], f"end {time.time():.6f} {os.getpid()}")
        return "ok"

    return await ctx.step("work", work)


registry = setup(use={"slot": workflow(slot_body, concurrency=Concurrency(max=2))})
