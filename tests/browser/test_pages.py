"""The operators' pages at a laptop's width, in real headless Chromium against daphne and a real
runner: the runs list fits 1280 px with no horizontal scroll, and a run is decided with its form."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.browser.conftest import PASSWORD
from tests.support import wait_for
from workflows.models import AuditEntry, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def narrow(server, operator, chromium):
    """A logged-in operator's page in a 1280 px wide window."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, base_url=server)
    context.set_default_timeout(30_000)
    page = context.new_page()
    page.goto("/admin/login/?next=/admin/")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_url("**/admin/")
    yield page
    context.close()


def horizontal_overflow(page) -> int:
    """How far the page, or any box of it that scrolls sideways (the admin's results table does),
    is wider than what shows."""
    return page.evaluate(
        """() => Math.max(0, ...[document.documentElement, ...document.querySelectorAll('.results, .wf-timeline, table')]
            .map(el => el.scrollWidth - el.clientWidth))"""
    )


def test_the_runs_list_fits_1280_px_without_horizontal_scroll(narrow, processes, tmp_path):
    processes.flag_dir.joinpath("charge-broken").touch()
    long_key = "customer-42/order-2026-12-01T10:15:00Z/retry-of-7f3c9a2e-long-reference"
    for key in (long_key, "job-2", "job-3"):
        flows.registry.client("approval").get_or_create([key])
    failed = flows.registry.client("payment").get_or_create(["order-99"])
    processes.runner()
    wait_for(lambda: Run.objects.get(id=failed.run_id).status == "failed", 30, "the payment to fail")
    wait_for(lambda: Run.objects.filter(status="waiting").count() == 3, 30, "three runs to wait")
    narrow.goto("/admin/workflows/run/")
    expect(narrow.locator("#result_list tbody tr")).to_have_count(4)
    narrow.screenshot(path=str(tmp_path / "changelist.png"), full_page=True)
    assert horizontal_overflow(narrow) <= 0
    # The long key is all there, wrapped, not cut off unseen.
    cell = narrow.locator("#result_list td.field-key_display").filter(has_text="customer-42").first
    assert cell.inner_text().replace("\n", "") == long_key


def test_approve_from_the_dashboard_with_the_decision_form(narrow, processes):
    handle = flows.registry.client("approval").get_or_create(["decide-2"])
    processes.runner()
    wait_for(
        lambda: Run.objects.get(id=handle.run_id).status == "waiting", 30, "the run to wait for approval"
    )
    narrow.goto("/dashboard/")
    narrow.locator(f'tr[data-decision="{handle.run_id}"] a[data-choice="Approve"]').click()
    expect(narrow.locator("[data-operator]")).to_have_text("operator")
    expect(narrow.locator("[data-choice-body]")).to_have_text('{"by": "operator"}')
    narrow.click('button[data-decide="Approve"]')
    expect(narrow.locator("#run-live [data-run-status]")).to_have_attribute("data-run-status", "completed")
    assert Run.objects.get(id=handle.run_id).result["approved_by"] == "operator"
    audit = AuditEntry.objects.get(run_id=handle.run_id)
    assert (audit.action, audit.actor) == ("send", "operator")
    assert horizontal_overflow(narrow) <= 0
