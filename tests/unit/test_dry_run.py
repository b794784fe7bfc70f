"""The replayer's DryRun drives the same primitives as an execution, through the same protocol
(workflows.core.recorder), with no execution and no store behind it: recorded entries replay, the
first entry that would do work or wait stops it, and nothing runs or is written."""

from __future__ import annotations

import pytest

from workflows import event, queue, setup, workflow
from workflows.core.signals import Frontier
from workflows.engine import execution
from workflows.engine.replayer import DryRun

RAN: list[str] = []


def _flow():
    async def body(ctx):
        await ctx.rollback_checkpoint("checkpoint")
        await ctx.step("reserve", lambda s: RAN.append("reserve") or 1, rollback=lambda s, o: None)
        version = await ctx.get_version("gate", 2)

        async def left(c):
            return await c.step("l", lambda s: RAN.append("l") or "L")

        async def right(c):
            return await c.step("r", lambda s: RAN.append("r") or "R")

        both = await ctx.join("both", {"left": left, "right": right})
        ctx.broadcast("progress", {"version": version, "both": both})
        await ctx.queue.next("wait", names=["go"])
        await ctx.step("ship", lambda s: RAN.append("ship") or 1)

    return setup(
        use={"wf": workflow(body, queues={"go": queue()}, events={"progress": event()}, version="v1")}
    )


async def test_dry_run__replays_to_the_first_wait_with_no_execution(h, monkeypatch):
    reg = _flow()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    run = await handle.ainfo()
    assert run.status == "waiting"
    RAN.clear()

    def no_execution(*args, **kwargs):
        raise AssertionError("a dry run builds no Execution")

    monkeypatch.setattr(execution.Execution, "__init__", no_execution)
    dry = DryRun(
        run=run, definition=reg.get("wf"), registry=reg, history=h.store.load_history(run.id), clock=h.clock
    )
    with pytest.raises(Frontier):
        await dry.definition.run(dry.context(""))

    assert dry.frontier == "queue 'wait'"
    assert dry.compensations() == ["reserve"]
    assert RAN == []  # no step body ran


async def test_dry_run__stops_at_the_first_new_step_of_a_fresh_run(h):
    reg = _flow()
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    run = await handle.ainfo()
    RAN.clear()

    dry = DryRun(run=run, definition=reg.get("wf"), registry=reg, history=[], clock=h.clock)
    with pytest.raises(Frontier):
        await dry.definition.run(dry.context(""))

    assert dry.frontier == "step 'reserve'"  # the checkpoint before it is kept in the history alone
    assert RAN == [] and h.store.load_history(run.id) == []
