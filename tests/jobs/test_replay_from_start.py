"""The example job replayed from its first entry, `wait-start`: the start message the superseded
wait consumed is delivered again, so a runner takes the job to `published` again (it stayed stuck
waiting before); or, the operator having chosen to wait for new messages, the job waits until a
new start arrives. Either way the old brief and URL stop reading as the job's current ones. On
SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

from jobs.submission import job_submit, jobs_client
from jobs.workflows import registry
from workflows import operations
from workflows.models import AuditEntry, Entry, Message
from workflows.testing import run_until_idle

from .conftest import SAMPLE

pytestmark = pytest.mark.django_db


def start_job(title: str = "Discovery call") -> str:
    return job_submit({"title": title, "transcript": SAMPLE}).job_id


def info(job_id: str):
    return jobs_client().get([job_id]).info()


def wait_start(run_id: str) -> Entry:
    return Entry.objects.get(run_id=run_id, name="wait-start", superseded=False)


def published_job(demo) -> tuple[str, object]:
    job_id = start_job()
    run_until_idle(registry)
    run = info(job_id)
    assert run.status == "completed" and len(demo.posts) == 1
    return job_id, run


def test_replayed_from_wait_start__the_start_is_delivered_again_and_the_job_publishes_again(demo):
    job_id, run = published_job(demo)
    (start,) = Message.objects.filter(run_id=run.id)

    operations.replay_from(run.id, wait_start(run.id).id, actor="ops:ada", reason="new model")

    accepted = info(job_id)
    assert accepted.status == "pending" and accepted.state["stage"] == "queued"
    assert accepted.state["summary"] is None and accepted.state["url"] is None  # no stale result
    assert accepted.state["extracted"] is None and accepted.state["companies"] == []
    audit = AuditEntry.objects.get(run_id=run.id, action="replay")
    assert audit.details["redelivered"] == [{"id": start.id, "queue": "start"}]

    run_until_idle(registry)

    again = info(job_id)
    assert again.status == "completed" and again.state["stage"] == "published"
    assert again.state["url"] == "http://demo.test/cms/posts/2" != run.state["url"]
    assert demo.calls == {"extract": 2, "crm": 6, "summarize": 2, "cms": 2}
    (same,) = Message.objects.filter(run_id=run.id)  # the same row, consumed again: no copy
    assert same.id == start.id and same.consumed_by_id == wait_start(run.id).id


def test_replayed_from_wait_start_waiting_for_new__it_waits_until_a_new_start(demo):
    job_id, run = published_job(demo)
    (start,) = Message.objects.filter(run_id=run.id)

    operations.replay_from(run.id, wait_start(run.id).id, actor="ops:ada", reason="redo", redeliver=False)
    run_until_idle(registry)

    waiting = info(job_id)
    assert waiting.status == "waiting" and waiting.state["url"] is None and waiting.state["summary"] is None
    assert Message.objects.get(id=start.id).consumed_by.superseded  # kept with the superseded wait
    assert len(demo.posts) == 1

    jobs_client().get([job_id]).send("start", {"title": "Second take", "transcript": SAMPLE})
    run_until_idle(registry)

    done = info(job_id)
    assert done.status == "completed" and done.state["url"] == "http://demo.test/cms/posts/2"
    assert [p["title"] for p in demo.posts.values()] == ["Discovery call", "Second take"]


def test_replay_from_a_later_step_forgets_only_what_runs_again(demo):
    job_id, run = published_job(demo)
    enrich_1 = Entry.objects.get(run_id=run.id, name="enrich-1", superseded=False)

    operations.replay_from(run.id, enrich_1.id, actor="ops:ada", reason="CRM fixed")

    state = info(job_id).state
    assert state["extracted"] == run.state["extracted"]  # extract does not run again
    assert state["companies"] == run.state["companies"][:1]
    assert state["summary"] is None and state["url"] is None
    assert AuditEntry.objects.get(run_id=run.id, action="replay").details["redelivered"] == []
