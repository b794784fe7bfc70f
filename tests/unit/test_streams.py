"""Streams from steps (`step.stream`), over the real store on the test database: chunks are
stored in order and in batches, a retry starts the step's text over (`seq` 0), a replayed step
does not stream again, and a refused write leaves nothing behind. Readers over HTTP and the
WebSocket: tests/api/test_streams_sse.py, tests/inspector; a runner killed mid-stream:
tests/acceptance/test_stream_crash.py."""

from __future__ import annotations

import asyncio

import pytest

from workflows import queue, setup, workflow
from workflows.core import streams as core_streams
from workflows.core.streams import StreamClosed, latest_attempts, text_of
from workflows.models import Entry, StreamChunk


def _chunks(run_id: str, stream: str = "write"):
    return list(StreamChunk.objects.filter(run_id=run_id, stream=stream).order_by("id"))


def _one_step(fn, **options):
    async def body(ctx):
        return await ctx.step("write", fn, **options)

    return setup(use={"wf": workflow(body)})


async def test_chunks_are_stored_in_order_in_far_fewer_commits_than_chunks(h):
    async def write(step):
        for n in range(1000):
            await step.stream.write(f"t{n} ")
        return "done"

    reg = _one_step(write)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    before = h.store.commits
    await h.run(reg)

    rows = _chunks(handle.run_id)
    assert [r.data for r in rows] == [f"t{n} " for n in range(1000)]
    assert [r.seq for r in rows] == list(range(1000))
    assert {(r.step, r.attempt, r.scope) for r in rows} == {("write", 1, "")}
    assert h.store.commits - before < 100  # batched by time and size, not one commit per chunk
    chunks = [c async for c in handle.stream("write")]
    assert text_of(chunks) == "".join(f"t{n} " for n in range(1000))


async def test_a_retry_starts_the_steps_text_over_and_readers_keep_the_latest_attempt(h):
    async def write(step):
        for word in ("par", "tial") if step.attempt == 1 else ("whole", " text"):
            await step.stream.write(word)
        if step.attempt == 1:
            raise RuntimeError("the model hung up")
        return "ok"

    reg = _one_step(write, retry_backoff_base=0.001)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    rows = _chunks(handle.run_id)
    assert [(r.attempt, r.seq, r.data) for r in rows] == [
        (1, 0, "par"), (1, 1, "tial"), (2, 0, "whole"), (2, 1, " text"),
    ]  # fmt: skip
    chunks = [c async for c in handle.stream("write")]
    assert latest_attempts(chunks) == {("", "write"): ["whole", " text"]}
    assert text_of(chunks) == "whole text"
    assert [c.id for c in chunks] == [r.id for r in rows]
    later = [c async for c in handle.stream("write", after=rows[1].id)]
    assert [c.data for c in later] == ["whole", " text"]


async def test_a_steps_first_stored_chunk_is_stored_after_the_step_is_marked_running(h):
    """So a crash after it records the attempt as lost and the rerun streams as the next attempt
    (tests/acceptance/test_stream_crash.py), however soon after the step's start it came."""
    seen: list[str] = []

    async def write(step):
        await step.stream("typing", ephemeral=True).write("...")  # stores nothing: marks nothing
        await step.stream.write("first")
        chunks = StreamChunk.objects.filter(run_id=step.run_id, stream="write")
        deadline = asyncio.get_running_loop().time() + 10
        while not chunks.exists():  # the harness's reads: on the loop's thread, the test's connection
            assert asyncio.get_running_loop().time() < deadline, "the chunk was never stored"
            await asyncio.sleep(0.01)
        seen.extend(Entry.objects.filter(run_id=step.run_id, name="write").values_list("status", flat=True))
        return "ok"

    reg = _one_step(write)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert (await handle.ainfo()).status == "completed"
    assert seen == ["running"]


async def test_a_step_replayed_from_its_record_does_not_stream_again(h):
    runs: list[int] = []

    async def body(ctx):
        async def write(step):
            runs.append(step.attempt)
            await step.stream.write({"token": "once"})
            return "brief"

        brief = await ctx.step("write", write)
        await ctx.queue.next("approval", names=["approve"])  # the run suspends; it replays after
        return brief

    reg = setup(use={"wf": workflow(body, queues={"approve": queue()})})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    await handle.asend("approve", {})
    await h.run(reg)

    assert (await handle.ainfo()).status == "completed" and runs == [1]
    assert [r.data for r in _chunks(handle.run_id)] == [{"token": "once"}]


async def test_named_and_sync_streams(h):
    def write(step):  # a sync step: `write_sync`
        step.stream.write_sync("own")
        step.stream("log").write_sync({"line": 1})
        return "ok"

    reg = _one_step(write)
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)
    assert [r.data for r in _chunks(handle.run_id)] == ["own"]
    assert [r.data for r in _chunks(handle.run_id, "log")] == [{"line": 1}]
    assert [c async for c in handle.stream("nothing", wait=False)] == []


async def test_a_write_after_its_step_ended_fails_the_writing_step_at_once(h):
    kept = []

    async def body(ctx):
        async def first(step):
            kept.append(step.stream)
            return 1

        async def second(step):
            await kept[0].write("late")
            return 2

        await ctx.step("first", first)
        return await ctx.step("second", second)

    reg = setup(use={"wf": workflow(body)})
    handle = await h.client(reg, "wf").aget_or_create(["k"])
    await h.run(reg)

    info = await handle.ainfo()
    assert info.status == "failed"
    assert h.entries(handle.run_id)["second"].attempts == 1  # not retried
    assert f"{StreamClosed.__name__}: stream 'first' of step 'first'" in info.error["message"]
    assert not StreamChunk.objects.filter(run_id=handle.run_id).exists()


@pytest.mark.parametrize("limit", ["chunk", "stream"])
async def test_a_write_over_the_limits_fails_the_step_and_stores_nothing_of_it(h, settings, limit):
    if limit == "chunk":
        settings.WORKFLOWS = {**settings.WORKFLOWS, "MAX_VALUE_BYTES": 1000}
    else:
        core_streams.set_max_stream_bytes(lambda: 1000)

    async def write(step):
        await step.stream.write("x" * 400)
        await step.stream.write("y" * 1200)
        return "never"

    try:
        reg = _one_step(write)
        handle = await h.client(reg, "wf").aget_or_create(["k"])
        await h.run(reg)
    finally:
        core_streams.set_max_stream_bytes(core_streams._default_max_stream_bytes)

    info = await handle.ainfo()
    assert (
        info.status == "failed" and "step 'write' failed (critical): ValueTooLarge" in info.error["message"]
    )
    assert "stream 'write'" in info.error["message"]
    assert [r.data for r in _chunks(handle.run_id)] == ["x" * 400]
