"""SIGKILL of a real runner while a step streams: the first attempt's chunks stay stored (what a
reader saw), the rerun starts its own attempt of the stream at seq 0, and what a reader keeps
(`text_of`) is exactly the rerun's text, which is also the recorded output."""

from __future__ import annotations

import asyncio

from tests.support import wait_for
from workflows.core.streams import text_of
from workflows.models import Entry, Run, StreamChunk
from workflows.storage.django import DjangoStore

from .stream_flows import WORDS, registry


def _stored(run_id: str) -> list[tuple[int, int, str]]:
    return list(StreamChunk.objects.filter(run_id=run_id).values_list("attempt", "seq", "data"))


def test_kill_mid_stream__the_rerun_starts_the_stream_over_and_its_text_is_the_output(stream_runners):
    handle = registry.client("stream-write", store=DjangoStore()).get_or_create(["sk"])
    first = stream_runners.start()
    wait_for(
        lambda: StreamChunk.objects.filter(run_id=handle.run_id).count() == 3,
        what="the first attempt's three chunks to be stored",
    )
    first.kill()
    first.wait(10)
    (stream_runners.workdir / "release").touch()
    stream_runners.start()
    wait_for(
        lambda: Run.objects.get(id=handle.run_id).status in ("completed", "failed"),
        what="the run to finish after the restart",
    )

    run = handle.info()
    assert run.status == "completed", stream_runners.said()
    assert stream_runners.ledger()["sk write:start"] == 2
    stored = _stored(handle.run_id)
    assert stored[:3] == [(1, 0, "try 1: "), (1, 1, "The "), (1, 2, "brief ")]  # the cut-off attempt
    # The rerun: the next attempt (the cut one is recorded as lost), its text from seq 0.
    entry = Entry.objects.get(run_id=handle.run_id, name="write")
    assert [a.outcome for a in entry.attempt_history()] == ["lost", "ok"]
    assert stored[3:] == [(2, seq, data) for seq, data in enumerate(["try 2: ", *WORDS])]

    chunks = asyncio.run(_read_all(handle))
    assert [c.id for c in chunks] == sorted(c.id for c in chunks)
    assert text_of(chunks) == run.result == "try 2: " + "".join(WORDS)
    assert text_of(handle.chunks("write")) == run.result  # the sync page reads the same rows


async def _read_all(handle) -> list:
    """What a Python reader gets following the finished run's stream from its start."""
    return [chunk async for chunk in handle.stream("write")]
