"""The bulk pages in real headless Chromium against daphne and a real runner: a filter's dry run
names the count, the confirmation starts the operation, a runner executes it and the operation's
page follows its progress live; the dashboard lists it; Abort stops an operation."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.support import wait_for
from workflows.bulk import control, executor
from workflows.models import BulkOperation, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def waiting_approvals(processes, n: int) -> list[str]:
    client = flows.registry.client("approval")
    ids = [client.get_or_create([f"post-{i}"]).run_id for i in range(n)]
    processes.runner()
    wait_for(lambda: Run.objects.filter(id__in=ids, status="waiting").count() == n, 30, "the runs to wait")
    return ids


def test_filter_dry_run_confirm_and_live_progress_until_done(page, processes):
    ids = waiting_approvals(processes, 3)
    page.goto("/dashboard/bulk/")
    page.select_option("select[name=action]", "cancel")
    page.fill("input[name=workflow]", "approval")
    page.check("input[name=status][value=waiting]")
    page.locator("[data-bulk-preview]").click()

    expect(page.locator("[data-bulk-count]")).to_have_text("3")
    expect(page.locator("[data-bulk-sample] [data-run]")).to_have_count(3)
    start = page.locator("[data-bulk-start]")
    expect(start).to_have_text("Cancel 3 runs")
    page.fill("textarea[name=why]", "the campaign was called off")
    start.click()

    page.wait_for_url("**/dashboard/bulk/*/")
    progress = page.locator("[data-bulk-op]")
    expect(progress).to_have_attribute(
        "data-status", "done", timeout=30_000
    )  # the runner did it; the page followed
    expect(page.locator("[data-bulk-done]")).to_have_text("3")
    wait_for(
        lambda: Run.objects.filter(id__in=ids, status="cancelled").count() == 3,
        30,
        "the runs to end cancelled",
    )

    page.goto("/dashboard/")
    op = BulkOperation.objects.get()
    expect(page.locator(f'#wf-bulk [data-bulk-op="{op.id}"]')).to_have_attribute("data-status", "done")


def test_abort_button_stops_the_operation_after_its_batch(page, processes):
    waiting_approvals(processes, 2)
    op = control.start("cancel", {"workflow": "approval"}, actor="operator", reason="r")
    assert executor.claim("held-by-test", op_id=op.id) is not None  # no runner takes it meanwhile
    page.goto(f"/dashboard/bulk/{op.id}/")
    expect(page.locator("[data-bulk-op]")).to_have_attribute("data-status", "running")

    page.locator("[data-bulk-abort]").click()
    expect(page.locator("[data-bulk-abort-requested]")).to_contain_text("stops after the current batch")
    executor.execute(op.id, "held-by-test")

    expect(page.locator("[data-bulk-op]")).to_have_attribute("data-status", "aborted", timeout=30_000)
    assert Run.objects.filter(cancel_requested=True).count() == 0
