"""`GET /api/runs/{id}/streams/{name}`: a run's stream as Server-Sent Events. A late reader gets
every chunk, each with its id; a reconnecting one resumes after `Last-Event-ID` (or `?after=`);
a retried step's new attempt starts over at `seq` 0; `event: end` closes a finished run's
stream; an unknown run or stream is 404 in the API's error shape. A reader waiting on a live run
in a real browser: tests/browser/test_run_streams.py."""

from __future__ import annotations

import json

from asgiref.sync import async_to_sync

from tests.api import flows
from workflows import conf
from workflows.testing import run_until_idle


def _events(response) -> list[tuple[str | None, str, dict]]:
    """(id, event, data) of each SSE event; the `retry:` hint and comments left out."""
    text = async_to_sync(_read)(response.streaming_content).decode()
    out = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if ": " in line and not line.startswith(":")
        )
        if "event" in fields:
            out.append((fields.get("id"), fields["event"], json.loads(fields["data"])))
    return out


async def _read(content) -> bytes:
    return b"".join([part async for part in content])


def _finished_writer(failures: int = 0) -> str:
    flows.FAILURES["write"] = failures
    handle = conf.registry().client("writer").get_or_create(["w"])
    run_until_idle(conf.registry())
    assert handle.info().status == "completed"
    return handle.run_id


def test_a_late_reader_gets_every_chunk_then_the_end(api):
    run_id = _finished_writer(failures=1)
    response = api.get(f"/api/runs/{run_id}/streams/write")

    assert response.status_code == 200 and response["Content-Type"] == "text/event-stream"
    events = _events(response)
    chunks = [data for _id, kind, data in events if kind == "chunk"]
    assert [(c["attempt"], c["seq"], c["data"]) for c in chunks] == [
        (1, 0, "Hel"), (1, 1, "lo"), (2, 0, "Hello"), (2, 1, ", "), (2, 2, "world"),
    ]  # fmt: skip
    assert [int(i) for i, kind, _d in events if kind == "chunk"] == [c["id"] for c in chunks]
    assert events[-1][1:] == ("end", {"status": "completed"})


def test_a_reconnecting_reader_resumes_after_last_event_id_which_wins_over_after(api):
    run_id = _finished_writer()
    first = _events(api.get(f"/api/runs/{run_id}/streams/write"))
    cursor = first[0][0]

    resumed = api.client.get(
        f"/api/runs/{run_id}/streams/write", {"after": 0}, headers={**api.headers, "Last-Event-ID": cursor}
    )
    assert [d["data"] for _i, kind, d in _events(resumed) if kind == "chunk"] == [", ", "world"]
    by_query = _events(api.get(f"/api/runs/{run_id}/streams/write", {"after": first[1][0]}))
    assert [d["data"] for _i, kind, d in by_query if kind == "chunk"] == ["world"]


def test_unknown_runs_and_streams_are_404_and_the_key_is_required(api, client):
    run_id = _finished_writer()
    for path in (
        f"/api/runs/{run_id}/streams/nope",
        "/api/runs/00000000-0000-0000-0000-000000000000/streams/write",
        "/api/runs/not-a-uuid/streams/write",
    ):
        response = api.get(path)
        assert response.status_code == 404, path
        assert response.json()["error"]["code"] == "not_found"
    assert client.get(f"/api/runs/{run_id}/streams/write").status_code == 401
    assert api.get(f"/api/runs/{run_id}/streams/write", {"after": -1}).status_code == 422
