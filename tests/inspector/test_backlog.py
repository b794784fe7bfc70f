"""The dashboard's backlog panel: figures by workflow from run rows, served in the stats fragment."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import User
from django.urls import reverse

from inspector import pages
from workflows.models import Run

pytestmark = pytest.mark.django_db


def run_at(registry, workflow: str, key: str, **fields) -> str:
    run_id = registry.client(workflow).get_or_create([key]).run_id
    Run.objects.filter(id=run_id).update(**fields)
    return run_id


def test_backlog__due_oldest_stalled_and_median_start_lateness(registry):
    now = dt.datetime.now(dt.UTC)
    ago = lambda seconds: now - dt.timedelta(seconds=seconds)  # noqa: E731
    run_at(registry, "flaky", "due-old", wake_at=ago(300))
    run_at(registry, "flaky", "due-new", status="waiting", wake_at=ago(5))
    run_at(registry, "flaky", "not-due", status="waiting", wake_at=now + dt.timedelta(hours=1))
    run_at(
        registry, "flaky", "stalled", status="running", wake_at=ago(1), started_at=ago(60), created_at=ago(60)
    )
    # Started in the last 15 minutes, 10 s and 30 s after creation: the median is 20 s.
    for key, late in (("s1", 10), ("s2", 30)):
        run_at(registry, "expense", key, status="completed", wake_at=None, created_at=ago(100 + late),
               started_at=ago(100), transitioned_at=ago(50))  # fmt: skip
    run_at(registry, "expense", "long-ago", status="completed", wake_at=None, created_at=ago(3600),
           started_at=ago(1800), transitioned_at=ago(1800))  # fmt: skip

    rows = {row.workflow: row for row in pages.backlog(now)}
    assert rows["flaky"].due == 2
    assert rows["flaky"].oldest_due == "5 min" and rows["flaky"].late
    assert rows["flaky"].stalled == 1
    assert rows["expense"].due == 0 and rows["expense"].oldest_due == "—" and not rows["expense"].late
    assert rows["expense"].started_recently == 2
    assert rows["expense"].median_lateness == "20 s"
    assert rows["approval"].due == 0 and rows["approval"].median_lateness == "—"  # served, idle


def test_the_stats_fragment_carries_the_panel(client, registry):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    run_at(registry, "flaky", "due", wake_at=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=2))
    html = client.get(reverse("inspector:stats")).content.decode()
    assert 'id="wf-backlog"' in html and 'data-backlog-workflow="flaky"' in html
    assert client.get(reverse("inspector:dashboard")).content.decode().count('id="wf-backlog"') == 1
