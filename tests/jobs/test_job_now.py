"""A job tells the truth after a repair, and says what is happening now: `GET /jobs/{id}` and
`manage.py jobs status` give `stage` and `detail` from the latest progress event (or the step
running now) and `nextAttemptAt` when a retry is due; a replay or a retry now clears the old error
and says where the job is (`queued` once a replay is accepted)."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import call_command

from jobs.submission import job_submit, jobs_client
from jobs.workflows import registry
from workflows import operations
from workflows.models import Entry, Run
from workflows.testing import run_until_idle

from .conftest import SAMPLE

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("job_registry")]


def start_job() -> str:
    return job_submit({"title": "Discovery call", "transcript": SAMPLE}).job_id


def read(client, job_id: str) -> dict:
    response = client.get(f"/jobs/{job_id}")
    assert response.status_code == 200, response.content
    return response.json()


def status_text(job_id: str) -> str:
    out = io.StringIO()
    call_command("jobs", "status", job_id, stdout=out)
    return out.getvalue()


def current(job_id: str, name: str) -> Entry:
    return Entry.objects.get(run_id=jobs_client().get([job_id]).run_id, name=name, superseded=False)


def test_a_replayed_job_drops_its_old_error_and_is_queued_then_published(client, demo):
    demo.script("cms", ["400"])  # the CMS refuses the post: publish fails for good
    job_id = start_job()
    run_until_idle(registry)
    failed = read(client, job_id)
    assert (failed["status"], failed["stage"], failed["state"]["stage"]) == ("failed", "failed", "failed")
    assert failed["state"]["error"].startswith("publish failed (CMS returned 400")
    assert failed["detail"] == failed["state"]["error"] and failed["nextAttemptAt"] is None

    operations.replay_from(jobs_client().get([job_id]).run_id, current(job_id, "publish").id, actor="ops")

    accepted = read(client, job_id)
    assert accepted["status"] == "pending"
    assert accepted["state"]["error"] is None and accepted["state"]["stage"] == "queued"
    assert accepted["stage"] == "queued"
    assert accepted["detail"] == "replay from publish accepted; waiting for a runner"
    text = status_text(job_id)
    assert "status pending  stage queued" in text and "now: replay from publish accepted" in text
    assert '"error": null' in text

    run_until_idle(registry)
    done = read(client, job_id)
    assert (done["status"], done["stage"], done["state"]["stage"]) == ("completed", "published", "published")
    assert done["state"]["error"] is None and done["detail"] == done["state"]["url"]


def test_a_retry_due_is_told_with_its_time_and_a_retry_now_says_so(client, demo):
    demo.script("extract", ["503"])
    job_id = start_job()
    run_until_idle(registry, advance=False)  # the retry is due in 4 s of a clock that stays put
    extract = current(job_id, "extract")
    assert extract.status == "retrying"

    waiting = read(client, job_id)
    assert (waiting["status"], waiting["stage"]) == ("waiting", "extracting")
    assert waiting["detail"] == "extract failed (model returned 503), retrying in 4 s"
    due = dt.datetime.fromisoformat(waiting["nextAttemptAt"])  # JSON keeps milliseconds
    assert abs(due - extract.wake_at) < dt.timedelta(milliseconds=1)
    text = status_text(job_id)
    assert "now: extract failed (model returned 503), retrying in 4 s" in text
    assert f"next attempt at {extract.wake_at.isoformat(timespec='seconds')}" in text

    before = dt.datetime.now(dt.UTC)
    operations.retry_now(str(extract.run_id), extract.id, actor="ops")
    hurried = read(client, job_id)
    assert (hurried["stage"], hurried["detail"]) == ("extracting", "extract: retrying now (operator)")
    assert hurried["state"]["error"] is None
    assert dt.datetime.fromisoformat(hurried["nextAttemptAt"]) >= before - dt.timedelta(seconds=1)

    run_until_idle(registry)
    assert read(client, job_id)["stage"] == "published"


def test_the_running_step_is_what_happens_now(client, demo):
    job_id = start_job()
    run_until_idle(registry)
    run = Run.objects.get(id=jobs_client().get([job_id]).run_id)
    # As a runner holding the replayed summarize step would leave it: running, started just now.
    summarize = current(job_id, "summarize")
    operations.replay_from(str(run.id), summarize.id, actor="ops")
    Entry.objects.create(
        run=run, scope="", position=summarize.position, name="summarize", kind="step",
        status="running", attempts=1, started_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1),
    )  # fmt: skip

    now = read(client, job_id)
    assert (now["stage"], now["detail"]) == ("summarizing", "summarize is running")


def test_a_cancelled_job_that_waited_to_retry_says_it_will_not(client, demo):
    demo.script("extract", ["503"])
    job_id = start_job()
    run_until_idle(registry, advance=False)  # extract waits to retry
    run_id = jobs_client().get([job_id]).run_id
    operations.cancel(run_id, actor="ops", reason="not needed")
    run_until_idle(registry, advance=False)  # woken to end cancelled
    assert Run.objects.get(id=run_id).status == "cancelled"

    job = read(client, job_id)
    assert job["status"] == "cancelled" and job["nextAttemptAt"] is None
    assert "retrying" not in job["detail"] and job["detail"].startswith("cancelled")
    assert "next attempt" not in status_text(job_id)
