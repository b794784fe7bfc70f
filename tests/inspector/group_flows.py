"""A workflow with a concurrency group (2 runs per customer at once), for the inspector's pages."""

from __future__ import annotations

from workflows import Concurrency, setup, workflow


async def slot_body(ctx):
    return "ok"


registry = setup(
    use={"slot": workflow(slot_body, concurrency=Concurrency(max=2, key=lambda run: run.key[0]))}
)
