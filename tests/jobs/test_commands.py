"""`jobs submit` / `jobs status` and `demoservices` refusing bad input (in-process; the following
display with a real runner is in test_processes.py)."""

from __future__ import annotations

import io
import uuid

import pytest
from django.core.management import CommandError, call_command

from jobs.follow import progress_line
from jobs.submission import jobs_client
from workflows.models import Run


@pytest.mark.django_db
def test_jobs_submit__starts_a_job_and_status_shows_it(tmp_path):
    transcript = tmp_path / "call.txt"
    transcript.write_text("Acme Corp called. I will send the deck.")
    out = io.StringIO()
    call_command("jobs", "submit", "--title", "Call", "--transcript-file", str(transcript), stdout=out)
    job_id = out.getvalue().split()[1]
    assert jobs_client().get([job_id]).info().status == "pending"

    status = io.StringIO()
    call_command("jobs", "status", job_id, stdout=status)
    assert f"job {job_id}" in status.getvalue() and "stage queued" in status.getvalue()


@pytest.mark.django_db
def test_jobs_submit__refuses_an_empty_transcript_and_starts_nothing(tmp_path):
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    with pytest.raises(CommandError, match="invalid job"):
        call_command("jobs", "submit", "--title", "Call", "--transcript-file", str(empty))
    with pytest.raises(CommandError, match="cannot read the transcript"):
        call_command("jobs", "submit", "--title", "Call", "--transcript-file", str(tmp_path / "missing.txt"))
    assert Run.objects.count() == 0


@pytest.mark.django_db
def test_jobs_status__unknown_job():
    with pytest.raises(CommandError, match="no job"):
        call_command("jobs", "status", str(uuid.uuid4()))


def test_demoservices__refuses_a_bad_failure_script():
    with pytest.raises(CommandError, match="unknown demo answer"):
        call_command("demoservices", "--port", "0", "--fail", "extract=teapot")


def test_progress_line__stages_retries_and_failure():
    assert progress_line("enriching", "Acme Corp (1/3)").startswith("[########------------]  40%  enriching")
    assert progress_line("published", "http://x").startswith("[####################] 100%  published")
    for delay in ("250 ms", "4 s", "4.5 s", "1 min 5 s", "2 h"):
        retry = f"extract failed (model returned 429), retrying in {delay}"
        assert progress_line("extracting", retry) == f"  ! {retry}"
    assert progress_line("failed", "extract failed (model returned 401: no), not retried") == (
        "  x FAILED: extract failed (model returned 401: no), not retried"
    )
