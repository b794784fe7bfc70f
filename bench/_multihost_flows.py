"""The many-hosts bench's workflow (WORKFLOWS_REGISTRIES=bench._multihost_flows.registry).

A registry of its own, not bench.flows: a runner claims per workflow of its registry, so adding
one there would change what every other bench measures. `key[1]` steps, each trivial (with 10 it
is bench.flows' `bench_ten`), so the figures are the engine's: claim, history, commit.
"""

from __future__ import annotations

from workflows import setup, workflow


async def trivial(step):
    return 7


async def steps_body(ctx):
    total = 0
    for i in range(int(ctx.key[1])):
        total += await ctx.step(f"s{i}", trivial)
    return total


registry = setup(use={"bench_steps": workflow(steps_body)})
