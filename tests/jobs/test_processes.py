"""The AI job with real processes: `runworkflows` and `demoservices` as subprocesses on the test
database (SQLite file or PostgreSQL), a runner SIGKILLed mid-step, `jobs submit --follow`, and
`quickstart --exit-after-job`."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys

import httpx2
import pytest
from django.core.management import call_command

from jobs.models import PublishedBrief
from jobs.processes import BASE_DIR, Child, wait_until
from jobs.submission import job_submit, jobs_client
from tests.support import free_port, test_database_url
from workflows.models import Attempt, Entry, Run

from .conftest import SAMPLE, SAMPLE_COMPANIES

pytestmark = pytest.mark.django_db(transaction=True)

DEADLINE = 60.0  # seconds: a condition a healthy system meets in well under a second or two


class Demo:
    def __init__(self, child: Child, url: str) -> None:
        self.child, self.url = child, url

    def script(self, route: str, *responses: str) -> None:
        httpx2.post(
            f"{self.url}/_demo/script", json={"route": route, "responses": list(responses)}
        ).raise_for_status()

    def counts(self) -> dict[str, int]:
        return httpx2.get(f"{self.url}/_demo/calls").json()["counts"]

    def posts(self) -> list[dict]:
        return httpx2.get(f"{self.url}/cms/posts").json()["posts"]


@pytest.fixture
def demo(transactional_db, tmp_path):
    child = Child.manage("demo", "demoservices", "--port", "0", env=os.environ, log=tmp_path / "demo.log")
    try:
        wait_until(
            lambda: "listening on" in child.output(), timeout=DEADLINE, what="demo services", child=child
        )
        url = re.search(r"listening on (http://\S+)", child.output()).group(1)
        yield Demo(child, url)
    finally:
        child.stop()


@pytest.fixture
def start_runner(demo, tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url(),
        "OPENAI_BASE_URL": f"{demo.url}/v1",
        "OPENAI_API_KEY": "test-key",
        "CRM_API_URL": f"{demo.url}/crm",
        "CMS_API_URL": f"{demo.url}/cms",
        "WORKFLOWS_LEASE_SECONDS": "2",
        "WORKFLOWS_HEARTBEAT_SECONDS": "0.5",
    }
    runners: list[Child] = []

    def start() -> Child:
        log = tmp_path / f"runner-{len(runners)}.log"
        runners.append(Child.manage("runner", "runworkflows", env=env, log=log))
        return runners[-1]

    yield start
    for runner in runners:
        runner.stop()


def job_run(job_id: str) -> Run:
    return Run.objects.get(id=jobs_client().get([job_id]).run_id)


def wait_for_status(job_id: str, runner: Child, *statuses: str) -> Run:
    wait_until(
        lambda: job_run(job_id).status in statuses, timeout=DEADLINE, what=f"job {statuses}", child=runner
    )
    return job_run(job_id)


def test_runner_killed_during_summarize__resumes_without_repeating_extract_or_crm(demo, start_runner):
    demo.script("summarize", "hang:120")  # the first summarize call hangs until the runner dies
    first = start_runner()
    job_id = job_submit({"title": "Discovery call", "transcript": SAMPLE}).job_id
    wait_until(lambda: demo.counts().get("summarize") == 1, timeout=DEADLINE, what="summarize", child=first)
    wait_until(
        lambda: Entry.objects.filter(run=job_run(job_id), name="summarize", status="running").exists(),
        timeout=DEADLINE, what="summarize shown running", child=first,
    )  # fmt: skip

    first.kill()  # SIGKILL, mid-step
    done = {e.name for e in Entry.objects.filter(run=job_run(job_id), status="completed")}
    assert done == {"wait-start", "extract", "enrich-0", "enrich-1", "enrich-2"}

    second = start_runner()
    run = wait_for_status(job_id, second, "completed", "failed")

    assert run.status == "completed", run.error
    assert run.state["stage"] == "published"
    assert demo.counts() == {"extract": 1, "crm": len(SAMPLE_COMPANIES), "summarize": 2, "cms": 1}
    assert len(demo.posts()) == 1
    steps = Entry.objects.filter(run=run, kind="step", superseded=False)
    assert {e.name: e.attempts for e in steps} == {
        "extract": 1, "enrich-0": 1, "enrich-1": 1, "enrich-2": 1, "summarize": 2, "publish": 1,
        "record-publication": 1,
    }  # fmt: skip
    assert PublishedBrief.objects.filter(job_id=str(job_id)).count() == 1
    # The attempt the kill cut off is on record, with the runner that held it; the rerun followed it.
    lost, ok = Attempt.objects.filter(entry__run=run, entry__name="summarize").order_by("number")
    assert (lost.outcome, ok.outcome) == ("lost", "ok")
    # Restarted on the same host, the second runner saw the first one's process gone and took
    # the run over at once (no lease to wait out).
    assert "died" in lost.error["message"] and "its process on this host is gone" in lost.error["message"]


def test_jobs_submit_follow__prints_stages_retries_and_the_final_state(demo, start_runner, tmp_path):
    demo.script("extract", "429:1")
    start_runner()
    transcript = tmp_path / "call.txt"
    transcript.write_text(SAMPLE)
    out = io.StringIO()

    call_command("jobs", "submit", "--title", "Discovery call", "--transcript-file", str(transcript),
                 "--follow", "--timeout", str(DEADLINE), stdout=out)  # fmt: skip

    text = out.getvalue()
    lines = text.splitlines()
    assert re.match(r"job [0-9a-f-]{36}  run [0-9a-f-]{36}$", lines[0])
    assert "  ! extract failed (model returned 429), retrying in 1 s" in lines
    stages = [m.group(1) for m in re.finditer(r"^\[[#-]+\]\s+\d+%  (\w+)", text, re.M)]
    assert stages == [
        "queued",
        "extracting",
        "extracting",
        *["enriching"] * 3,
        "summarizing",
        "publishing",
        "published",
    ]
    assert "final state:" in text and '"stage": "published"' in text

    job_id = lines[0].split()[1]
    # The brief, as the model wrote it, between the summarizing and the publishing lines.
    summary = Run.objects.get(id=lines[0].split()[3]).state["summary"]
    written = text.split("summarizing", 1)[1].split("\n[", 1)[0]
    assert summary and summary in written, written
    status = io.StringIO()
    call_command("jobs", "status", job_id, stdout=status)
    assert f"job {job_id}" in status.getvalue() and "status completed  stage published" in status.getvalue()


def test_quickstart__runs_the_sample_job_to_published_and_exits(transactional_db, tmp_path):
    env = {**os.environ, "DATABASE_URL": test_database_url()}
    argv = [sys.executable, "manage.py", "quickstart", "--exit-after-job", "--port", str(free_port()),
            "--demo-port", str(free_port()), "--log-dir", str(tmp_path), "--job-timeout", str(DEADLINE)]  # fmt: skip
    done = subprocess.run(argv, cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=180)

    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "published" in out and '"stage": "published"' in out
    for path in ("/dashboard/", "/admin/", "/api/docs"):
        assert re.search(rf"http://127\.0\.0\.1:\d+{re.escape(path)}", out), out
    run = Run.objects.get(workflow="aiJob")
    assert (run.status, run.state["stage"]) == ("completed", "published")
