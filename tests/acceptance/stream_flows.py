"""Workflows whose steps stream, for the acceptance tests that kill or follow a real runner. A
step blocks until the test creates the file 'release' in ACCEPTANCE_DIR (with a deadline, so a
test that never releases fails rather than hangs)."""

from __future__ import annotations

import asyncio
import time

from workflows import setup, workflow

from .flows import _dir, log

RELEASE_DEADLINE = 60.0  # seconds a step waits for 'release' before it gives up
WORDS = ["The ", "brief ", "is ", "written ", "again."]


async def _until_released() -> None:
    deadline = time.monotonic() + RELEASE_DEADLINE
    while not (_dir() / "release").exists():  # the signal comes from another process
        if time.monotonic() > deadline:
            raise TimeoutError("the test never created 'release'")
        await asyncio.sleep(0.02)


async def _write_then_block(step) -> str:
    """Each attempt writes its own text: "try <attempt>: " then WORDS. Before 'release' exists it
    stops after two words and blocks (the runner is killed there); after, it writes them all."""
    log(step.key[0], f"{step.name}:start")
    pieces = [f"try {step.attempt}: ", *WORDS]
    if not (_dir() / "release").exists():
        for piece in pieces[:3]:
            await step.stream.write(piece)
        await _until_released()
        pieces = pieces[3:]
    for piece in pieces:
        await step.stream.write(piece)
    return "".join([f"try {step.attempt}: ", *WORDS])


async def write_body(ctx):
    return await ctx.step("write", _write_then_block)


async def _typing_then_done(step) -> int:
    """Ephemeral ticks on stream "typing" until 'release' exists, then one stored chunk of its own."""
    typing = step.stream("typing", ephemeral=True)
    deadline = time.monotonic() + RELEASE_DEADLINE
    ticks = 0
    while not (_dir() / "release").exists():
        if time.monotonic() > deadline:
            raise TimeoutError("the test never created 'release'")
        await typing.write({"tick": ticks})
        ticks += 1
        await asyncio.sleep(0.05)
    await step.stream.write("done")
    return ticks


async def typing_body(ctx):
    return await ctx.step("answer", _typing_then_done)


registry = setup(use={"stream-write": workflow(write_body), "stream-typing": workflow(typing_body)})
