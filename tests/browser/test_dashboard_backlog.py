"""The dashboard's backlog panel in real Chromium: due runs no runner has claimed, how late the
oldest is, stalled runs, then (live, once a runner takes them) how late recent runs started."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.support import wait_for
from workflows.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def row(page, workflow: str):
    return page.locator(f'#wf-backlog tr[data-backlog-workflow="{workflow}"]')


def test_backlog_panel__due_oldest_stalled_then_start_lateness(page, processes):
    now = dt.datetime.now(dt.UTC)
    client = flows.registry.client("payment")
    due = [client.get_or_create([f"order-{i}"]).run_id for i in range(3)]
    ten_minutes_ago = now - dt.timedelta(minutes=10)
    Run.objects.filter(id__in=due).update(created_at=ten_minutes_ago, wake_at=ten_minutes_ago)
    stalled = flows.registry.client("approval").get_or_create(["held-by-a-dead-runner"]).run_id
    Run.objects.filter(id=stalled).update(
        status="running", lease_owner="dead-runner", started_at=now, wake_at=now - dt.timedelta(minutes=2)
    )

    page.goto("/dashboard/")
    payment = row(page, "payment")
    expect(payment.locator("[data-due]")).to_have_text("3")
    expect(payment.locator("[data-oldest-due]")).to_have_text(
        re.compile(r"^1\d min( \d\d? s)?$")
    )  # about 10 minutes
    expect(payment.locator("[data-oldest-due].wf-late")).to_have_count(1)
    expect(payment.locator("[data-started-recently]")).to_have_text("0")
    expect(payment.locator("[data-median-lateness]")).to_have_text("—")
    expect(row(page, "approval").locator("[data-stalled]")).to_have_text("1")
    expect(row(page, "aiJob").locator("[data-due]")).to_have_text("0")  # every served workflow has a row

    expect(page.locator("[data-live-indicator].on")).to_be_visible()
    processes.runner()  # takes the due runs (and, once its lease lapsed, the stalled one)
    wait_for(
        lambda: Run.objects.filter(id__in=due, status="completed").count() == 3,
        60,
        "the payments to complete",
    )
    # The panel follows live: nothing due, three runs started about ten minutes after creation.
    expect(payment.locator("[data-due]")).to_have_text("0")
    expect(payment.locator("[data-oldest-due]")).to_have_text("—")
    expect(payment.locator("[data-started-recently]")).to_have_text("3")
    expect(payment.locator("[data-median-lateness]")).to_have_text(re.compile(r"^1\d min( \d\d? s)?$"))
