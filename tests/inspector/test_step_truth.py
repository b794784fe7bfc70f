"""The run page says what is true now of a step, not only what its record said when written: a
cancelled run's step that was waiting to retry is cancelled, with no next attempt due."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import User
from django.urls import reverse

from tests.inspector import flows
from tests.inspector.test_admin import entry, retrying_flaky
from workflows import conf, operations
from workflows.engine.runner import Runner
from workflows.models import Attempt, Entry, Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def inspect(admin_client, run: Run) -> str:
    response = admin_client.get(reverse("admin:workflows_run_inspect", args=[run.id]))
    assert response.status_code == 200
    return response.content.decode()


def summary_of(page: str, step: str) -> str:
    """The step's summary line on the run page (its status, duration and attempt count)."""
    return re.search(rf'data-entry="{step}".*?</summary>', page, re.S).group(0)


def test_a_cancelled_runs_step_that_waited_to_retry_reads_cancelled(admin_client):
    run = retrying_flaky("cancel-me")
    assert 'data-entry-status="retrying"' in inspect(admin_client, run)  # before: it is due again

    operations.cancel(str(run.id), actor="ops", reason="not needed")  # woken to end cancelled
    async_to_sync(Runner(registry=flows.registry, store=conf.default_store(), watch=False).run_due)()
    assert Run.objects.get(id=run.id).status == "cancelled"
    assert entry(run, "call").status == "retrying"  # the record is as the runner left it

    page = inspect(admin_client, run)
    assert 'data-entry="call" data-entry-status="cancelled"' in page
    assert "Next attempt" not in page and "next attempt in" not in page
    assert "Retry now" not in page
    assert not re.search(r'wf-badge[^"]*"[^>]*>\s*retrying', page)


def test_a_lost_attempt_shows_lost_not_an_end_before_its_start_nor_zero_ms(admin_client):
    run = retrying_flaky("lost-one")
    call = entry(run, "call")
    first = call.attempt_history()[0]
    began = first.retry_at  # the next attempt began when the backoff ended...
    # ...and its runner died; the lease lapsed before that start: recorded as recover_cut_attempts does.
    Attempt.objects.create(entry=call, number=2, started_at=began, finished_at=began - dt.timedelta(seconds=3),
                           outcome="lost", error={"name": "AttemptLost", "message": "runner died"})  # fmt: skip
    Attempt.objects.create(entry=call, number=3, started_at=began, finished_at=began,
                           outcome="lost", error={"name": "AttemptLost", "message": "runner died"})  # fmt: skip
    Entry.objects.filter(id=call.id).update(attempts=3)

    page = inspect(admin_client, run)
    rows = {n: re.search(rf'<tr data-attempt="{n}">(.*?)</tr>', page, re.S).group(1) for n in (2, 3)}
    for row in rows.values():
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ended, took = cells[2], cells[3]
        assert "lost" in ended and "lost" in took
        assert "0 ms" not in took and (began - dt.timedelta(seconds=3)).strftime("%H:%M:%S.") not in ended
    assert "attempt 2: lost" in page and "attempt 2: lost, 0 ms" not in page


def test_a_running_step_counts_its_attempt_in_progress(admin_client):
    run = retrying_flaky("running-one")
    call = entry(run, "call")
    # As a runner leaves it when its second attempt is slow: running, counting the one that ended.
    Entry.objects.filter(id=call.id).update(status="running", wake_at=None)
    Run.objects.filter(id=run.id).update(status="running")

    page = inspect(admin_client, run)
    assert "attempt 2 running" in page  # the timeline
    assert re.findall(r"(\d+) attempts?\b", summary_of(page, "call")) == ["2"]

    fresh = retrying_flaky("running-first")  # a first attempt in progress: none has ended
    Attempt.objects.filter(entry__run=fresh).delete()
    Entry.objects.filter(run=fresh, name="call").update(status="running", attempts=0, wake_at=None)
    page = inspect(admin_client, fresh)
    assert "attempt 1 running" in page
    assert re.findall(r"(\d+) attempts?\b", summary_of(page, "call")) == ["1"]
