"""Stream frames on a run's WebSocket (`?streams=`): stored chunks after their own cursor
(`stream_after=`), in id order, masked, only the streams asked for; ephemeral chunks straight
from the runner's commit hook; no stream frames unless asked; a bad cursor closes with 4400."""

from __future__ import annotations

import datetime as dt

import pytest
from channels.db import database_sync_to_async

from inspector import live
from tests.inspector.test_consumers import TIMEOUT, close_code, follow, new_run, receive_all
from workflows.core.records import Commit, EventOrigin
from workflows.core.streams import StreamChunk as Chunk
from workflows.masking import MASK
from workflows.models import StreamChunk

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def no_poll(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "POLL_SECONDS": 3600}


@database_sync_to_async
def add_chunks(run_id: str, stream: str, *data, attempt: int = 1) -> list[int]:
    now = dt.datetime.now(dt.UTC)
    return [
        StreamChunk.objects.create(
            run_id=run_id, stream=stream, data=d, created_at=now, step="write", attempt=attempt, seq=n
        ).id
        for n, d in enumerate(data)
    ]


async def test_stored_chunks_after_their_cursor_then_live_only_the_streams_asked_for():
    run_id = await new_run("s1")
    ids = await add_chunks(run_id, "write", "Hel", "lo")
    await add_chunks(run_id, "log", {"line": 1})
    ws = follow(run_id, "?streams=write")
    assert (await ws.connect())[0]
    assert await receive_all(ws, 2) == [
        {"stream": "write", "id": ids[0], "step": "write", "attempt": 1, "seq": 0, "data": "Hel"},
        {"stream": "write", "id": ids[1], "step": "write", "attempt": 1, "seq": 1, "data": "lo"},
    ]
    retried = await add_chunks(run_id, "write", "Hello", attempt=2)
    await live.on_commit(run_id, Commit())
    assert await receive_all(ws, 1) == [
        {"stream": "write", "id": retried[0], "step": "write", "attempt": 2, "seq": 0, "data": "Hello"}
    ]
    assert await ws.receive_nothing(0.2)  # the `log` chunk is not asked for
    await ws.disconnect()

    resumed = follow(run_id, f"?streams=*&stream_after={ids[1]}")
    assert (await resumed.connect())[0]
    frames = await receive_all(resumed, 2)
    assert sorted(f["stream"] for f in frames) == ["log", "write"]
    assert await resumed.receive_nothing(0.2)
    await resumed.disconnect()


async def test_no_stream_frames_unless_asked_and_secrets_are_masked():
    run_id = await new_run("s2")
    await add_chunks(run_id, "write", {"api_key": "sk-live-123", "text": "hi"})
    plain = follow(run_id)
    assert (await plain.connect())[0]
    assert await plain.receive_nothing(0.2)
    await plain.disconnect()
    ws = follow(run_id, "?streams=*")
    assert (await ws.connect())[0]
    assert (await ws.receive_json_from(TIMEOUT))["data"] == {"api_key": MASK, "text": "hi"}
    await ws.disconnect()


async def test_ephemeral_chunks_go_to_connected_followers_from_the_commit_hook():
    run_id = await new_run("s3")
    ws = follow(run_id, "?streams=tokens")
    assert (await ws.connect())[0]
    origin = EventOrigin(scope="", step="write", attempt=1)
    chunk = Chunk(stream="tokens", data="now", origin=origin, seq=0, size=5, ephemeral=True)
    await live.on_commit(run_id, Commit(stream_chunks=[chunk]))
    assert await receive_all(ws, 1) == [
        {"stream": "tokens", "step": "write", "attempt": 1, "seq": 0, "data": "now", "ephemeral": True}
    ]
    assert not await database_sync_to_async(StreamChunk.objects.filter(run_id=run_id).exists)()
    await ws.disconnect()


async def test_a_bad_stream_cursor_closes_with_4400():
    run_id = await new_run("s4")
    assert await close_code(follow(run_id, "?streams=*&stream_after=x")) == 4400
