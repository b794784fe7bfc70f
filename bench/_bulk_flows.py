"""The workflows of bench/bulk.py: `parked` runs wait on a queue forever (what the bulk action
cancels); `tick` is one short step (the trickle whose latency is measured)."""

from __future__ import annotations

from workflows import queue, setup, workflow


async def parked_run(ctx):
    await ctx.queue.next("park", names=["never"])


async def tick_run(ctx):
    return await ctx.step("tick", lambda step: 1)


registry = setup(use={"parked": workflow(parked_run, queues={"never": queue()}), "tick": workflow(tick_run)})
