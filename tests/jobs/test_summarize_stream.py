"""The example job's summarize step streams the brief's tokens: the demo model cuts its first
stream after 3 tokens (`cut:3`), the step retries, and what a reader keeps of the stream
(`text_of`) is the recorded summary, never a mix of the cut attempt and the retry. In-process
against the demo services; on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from jobs.submission import job_submit, jobs_client
from jobs.workflows import registry
from workflows.core.streams import text_of
from workflows.models import Entry, StreamChunk
from workflows.testing import run_until_idle

from .conftest import SAMPLE

pytestmark = pytest.mark.django_db


def test_a_stream_cut_after_3_tokens__the_retry_streams_the_brief_again_and_text_of_is_the_summary(demo):
    demo.script("summarize", ["cut:3"])
    job_id = job_submit({"title": "Discovery call", "transcript": SAMPLE}).job_id
    run_until_idle(registry)
    handle = jobs_client().get([job_id])
    run = handle.info()
    assert run.status == "completed"
    assert demo.calls["summarize"] == 2

    rows = list(StreamChunk.objects.filter(run_id=handle.run_id, stream="summarize"))
    cut, retry = rows[:3], rows[3:]
    assert [(r.step, r.attempt, r.seq) for r in cut] == [("summarize", 1, n) for n in range(3)]
    assert [(r.attempt, r.seq) for r in retry] == [(2, n) for n in range(len(retry))]
    assert "".join(r.data for r in retry).startswith("".join(r.data for r in cut))  # the same brief, again

    chunks = handle.chunks("summarize")
    assert [c.id for c in chunks] == [r.id for r in rows]
    recorded = Entry.objects.get(run_id=handle.run_id, name="summarize", superseded=False).output
    assert text_of(chunks) == recorded == run.state["summary"]
