"""Ephemeral chunks end to end: a real runner process's step writes `step.stream("typing",
ephemeral=True)`; its commit hook (inspector.live.on_commit, configured when REDIS_URL is set)
sends each chunk through the Redis channel layer to the run's WebSocket follower in this process,
and no row of that stream is stored. The step's own stream is stored as usual."""

from __future__ import annotations

import asyncio
import os

import pytest
from channels.db import database_sync_to_async

from tests.inspector.test_consumers import follow
from tests.support import wait_for
from workflows.models import Run, StreamChunk
from workflows.storage.django import DjangoStore

from .stream_flows import registry

pytestmark = pytest.mark.skipif(
    not os.environ.get("REDIS_URL"),
    reason="needs REDIS_URL: an ephemeral chunk leaves the runner's process only through the Redis channel layer",
)

FRAME_TIMEOUT = 30  # seconds: the first frame waits for the runner process to start


@database_sync_to_async
def _start_run() -> str:
    return registry.client("stream-typing", store=DjangoStore()).get_or_create(["ty"]).run_id


@database_sync_to_async
def _stored(run_id: str) -> list[tuple[str, object]]:
    return list(StreamChunk.objects.filter(run_id=run_id).values_list("stream", "data"))


async def _next_stream_frame(ws) -> dict:
    """The next stream frame (skipping the run's event frames, which have no `stream`)."""
    while True:
        frame = await ws.receive_json_from(timeout=FRAME_TIMEOUT)
        if "stream" in frame:
            return frame


async def test_ephemeral_chunks_reach_a_follower_from_a_runner_process_and_are_not_stored(stream_runners):
    run_id = await _start_run()
    ws = follow(run_id, "?streams=*")
    assert (await ws.connect(timeout=10))[0]
    stream_runners.start()

    ticks = [await _next_stream_frame(ws) for _ in range(3)]
    for frame in ticks:
        assert frame.pop("data").keys() == {"tick"}
        assert frame == {
            "stream": "typing",
            "step": "answer",
            "attempt": 1,
            "seq": frame["seq"],
            "ephemeral": True,
        }
    assert len({frame["seq"] for frame in ticks}) == 3  # three chunks, not one thrice

    (stream_runners.workdir / "release").touch()
    while (frame := await _next_stream_frame(ws)).get("ephemeral"):
        pass  # ticks written before the step saw 'release'
    assert (frame["stream"], frame["data"], frame["seq"]) == ("answer", "done", 0)
    assert isinstance(frame["id"], int)  # stored: it has a cursor
    await ws.disconnect()

    def finished() -> str | None:
        status = Run.objects.get(id=run_id).status
        return status if status in ("completed", "failed") else None

    status = await asyncio.to_thread(wait_for, finished, 30, "the run to finish")
    assert status == "completed", stream_runners.said()
    assert await _stored(run_id) == [("answer", "done")], stream_runners.said()  # no "typing" row
