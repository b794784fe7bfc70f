"""A schedule firing every 2 seconds, for the two-runner acceptance test: each run logs its fire
time to the ledger (ACCEPTANCE_DIR), so the test counts how many runs each fire time started."""

from __future__ import annotations

from workflows import schedule, setup, workflow

from .flows import log


async def tick_body(ctx):
    fire_time = ctx.state["$schedule"]["fire_time"]
    await ctx.step("tick", lambda s: log(fire_time, "tick"))
    return fire_time


registry = setup(
    use={"tick": workflow(tick_body)},
    schedules=[schedule("* * * * * */2", "tick", catch_up="all")],  # seconds last: every 2 s
)
