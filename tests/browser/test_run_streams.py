"""A step's stream on the run page, in real headless Chromium against real daphne and runner
processes: live while the step writes, a retry's text replacing the failed attempt's (never a
mix), a late reader (a second page) catching up from the start, and a reader whose server went
away resuming after the last chunk it saw (EventSource's Last-Event-ID) without doubling any.
The run's WebSocket's stream frames, read by the browser itself, resume after `stream_after`.
Nothing waits on time: the step holds on a flag file the test removes; every check waits on a
condition."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.support import wait_for
from workflows.models import Run, StreamChunk

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TEXT = '[data-run-streams] [data-stream="write"] pre'
BLOCK = '[data-run-streams] [data-stream="write"]'
# The browser's own WebSocket: collects `count` stream frames, then closes and returns them.
WS_FRAMES = """([runId, query, count]) => new Promise((resolve, reject) => {
  const frames = [];
  const ws = new WebSocket(`ws://${location.host}/ws/runs/${runId}/?${query}`);
  ws.onmessage = (m) => { const f = JSON.parse(m.data); if (f.stream) frames.push(f);
    if (frames.length === count) { ws.close(); resolve(frames); } };
  ws.onclose = (e) => { if (frames.length < count) reject(new Error("closed " + e.code)); };
  setTimeout(() => reject(new Error("timed out with " + JSON.stringify(frames))), 20000);
})"""


def inspect_url(run_id: str) -> str:
    return f"/admin/workflows/run/{run_id}/inspect/"


def test_the_run_page_streams_live_replaces_a_failed_attempt_and_resumes_after_a_reconnect(
    page, processes, server
):
    (processes.flag_dir / "write-fails").touch()
    (processes.flag_dir / "write-hold").touch()
    handle = flows.registry.client("writer").get_or_create(["w-1"])
    page.goto(inspect_url(handle.run_id))
    processes.runner()

    # Live: the retry's first chunk replaced the failed attempt's text; it holds after "Hello ".
    expect(page.locator(TEXT)).to_have_text("Hello ", timeout=30_000)
    expect(page.locator(f"{BLOCK} .wf-stream-attempt")).to_have_text("attempt 2")

    late = page.context.new_page()  # a late reader: everything from the start, the retry's text shown
    late.goto(inspect_url(handle.run_id))
    expect(late.locator(TEXT)).to_have_text("Hello ")
    expect(late.locator(BLOCK)).to_have_attribute("data-chunks", "3")  # Par, tial, Hello

    # The server goes away and comes back on the same port: the page's EventSource reconnects
    # and resumes after the last chunk it saw.
    port = int(server.rsplit(":", 1)[1])
    daphne = next(proc for name, proc in processes.procs if name == "daphne")
    daphne.kill()
    daphne.wait(10)
    processes.daphne(port)
    (processes.flag_dir / "write-hold").unlink()
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "completed", 60, "the run to complete")

    for reader in (page, late):
        expect(reader.locator(TEXT)).to_have_text("Hello world", timeout=30_000)
        expect(reader.locator("[data-run-streams]")).to_have_attribute("data-ended", "1")
    # 3 chunks before the cut, 1 after: none sent twice (a restart from 0 would make it 7).
    expect(page.locator(BLOCK)).to_have_attribute("data-chunks", "4")
    assert handle.info().result == "Hello world"

    # The WebSocket's stream frames, in the browser: all four, then only those after a cursor.
    frames = page.evaluate(WS_FRAMES, [handle.run_id, "streams=*", 4])
    assert [(f["attempt"], f["seq"], f["data"]) for f in frames] == [
        (1, 0, "Par"), (1, 1, "tial "), (2, 0, "Hello "), (2, 1, "world"),
    ]  # fmt: skip
    ids = list(StreamChunk.objects.filter(run_id=handle.run_id).order_by("id").values_list("id", flat=True))
    assert [f["id"] for f in frames] == ids
    after = page.evaluate(WS_FRAMES, [handle.run_id, f"streams=write&stream_after={ids[1]}", 2])
    assert [f["data"] for f in after] == ["Hello ", "world"]
