"""A workflow for the transaction-step crash test: its transaction writes a row, then blocks
(inside the open transaction) until the test creates the file 'release'."""

from __future__ import annotations

import datetime as dt
import time

from jobs.models import PublishedBrief
from workflows import setup, workflow

from .flows import _dir, log


def record_then_block(step):
    """Writes its row, says so in the ledger, then waits for 'release' with the row uncommitted."""
    PublishedBrief.objects.create(
        job_id=step.key[0], run_id=step.run_id, url="https://cms.example/briefs/1", title="t",
        published_at=dt.datetime.now(dt.UTC), step_key=step.idempotency_key,
    )  # fmt: skip
    log(step.key[0], f"{step.name}:start")
    while not (_dir() / "release").exists():
        time.sleep(0.02)
    log(step.key[0], f"{step.name}:end")
    return "recorded"


async def transact_body(ctx):
    before = await ctx.step("before", lambda s: log(s.key[0], "before") or 1)
    recorded = await ctx.transaction("record", record_then_block)
    return [before, recorded]


registry = setup(use={"transact": workflow(transact_body)})
