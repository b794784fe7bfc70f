"""How the inspector and the dashboard name a job: its title from the moment it is submitted
(before any step succeeds), and the stage `GET /jobs/{id}` gives (the step running now included),
read once per page however many jobs it lists. On SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from jobs.submission import job_submit, jobs_client
from jobs.workflows import registry
from workflows.models import Entry, Run
from workflows.reads import live
from workflows.testing import run_until_idle

from .conftest import SAMPLE

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("job_registry")]


@pytest.fixture
def operator(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def start_job(title: str = "Discovery call") -> str:
    return job_submit({"title": title, "transcript": SAMPLE}).job_id


def run_of(job_id: str) -> Run:
    return Run.objects.get(id=jobs_client().get([job_id]).run_id)


def header_labels(client, run: Run) -> dict:
    page = client.get(f"/admin/workflows/run/{run.id}/inspect/")
    assert page.status_code == 200
    labels = page.context["page"].labels
    return {"title": labels.title, **{d.key: d.text for d in labels.details}}


def test_a_job_is_titled_in_the_lists_before_its_first_step_succeeds(operator, demo):
    demo.script("extract", ["503"])  # the first step fails and waits to retry
    job_id = start_job("Call with Initech")
    queued = run_of(job_id)
    assert header_labels(operator, queued)["title"] == "Call with Initech"

    run_until_idle(registry, advance=False)
    run = run_of(job_id)
    assert Entry.objects.get(run=run, name="extract").status == "retrying"
    assert header_labels(operator, run) == {"title": "Call with Initech", "stage": "extracting"}
    listed = operator.get("/admin/workflows/run/").content.decode()
    assert "Call with Initech" in listed
    (summary,) = [live.run_summary(r) for r in live.recent_runs()]
    assert summary["labels"]["title"] == "Call with Initech"


def test_the_inspector_header_and_get_jobs_agree_on_the_stage_while_a_step_runs(operator, demo):
    demo.script("extract", ["503"])
    job_id = start_job()
    run_until_idle(registry, advance=False)  # extract waits to retry
    run = run_of(job_id)
    # As a runner taking the retry leaves it: running, started after the last progress event.
    Entry.objects.filter(run=run, name="extract", superseded=False).update(
        status="running", attempts=2, started_at=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    )
    assert run_of(job_id).state["stage"] == "queued"  # the step's own stage commits with its result

    job = operator.get(f"/jobs/{job_id}").json()
    header = header_labels(operator, run)
    assert job["stage"] == header["stage"] == "extracting"
    (summary,) = [live.run_summary(r) for r in live.recent_runs()]
    assert {d["key"]: d["text"] for d in summary["labels"]["details"]}["stage"] == "extracting"


def queries(read) -> int:
    with CaptureQueriesContext(connection) as captured:
        read()
    return len(captured.captured_queries)


@pytest.mark.parametrize(
    "read",
    [lambda client: client.get("/admin/workflows/run/"), lambda client: client.get("/dashboard/"),
     lambda client: [live.run_summary(r) for r in live.runs_changed_since(dt.datetime(2000, 1, 1, tzinfo=dt.UTC))]],
    ids=["admin-list", "dashboard", "live-list"],
)  # fmt: skip
def test_the_lists_read_the_stage_once_not_once_per_job(operator, demo, read):
    for i in range(2):
        start_job(f"job {i}")
    read(operator)  # the first read fills what the page caches (the doctor's findings, say)
    few = queries(lambda: read(operator))
    for i in range(2, 8):
        start_job(f"job {i}")
    assert queries(lambda: read(operator)) == few
