"""Pause and resume in real headless Chromium against daphne and a real runner: "Pause run" on a
waiting run's page, its confirmation asking why, the page then saying who paused it and why;
"Resume run" back, after which the runner takes the run on to its end. On the dashboard: a whole
workflow paused with the form, listed in "Paused workflows", and resumed from its row."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.support import wait_for
from workflows import operations
from workflows.models import AuditEntry, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def status(run_id: str) -> str:
    return Run.objects.get(id=run_id).status


def test_pause_then_resume_a_run_from_its_page(page, processes):
    handle = flows.registry.client("approval").get_or_create(["post-p1"])
    processes.runner()
    wait_for(lambda: status(handle.run_id) == "waiting", 30, "the run to wait for its approval")

    page.goto(f"/admin/workflows/run/{handle.run_id}/inspect/")
    page.locator('[data-action="pause"]').click()
    expect(page.locator("[data-changes]")).to_contain_text("paused at once")
    page.fill("textarea[name=why]", "CMS maintenance window")
    page.locator('[data-confirm="pause"]').click()

    page.wait_for_url(f"**/{handle.run_id}/inspect/")
    expect(page.locator("[data-paused-by]")).to_contain_text("by operator")
    expect(page.locator("[data-paused-reason]")).to_have_text("CMS maintenance window")
    expect(page.locator("[data-run-status]")).to_have_attribute("data-run-status", "paused")
    assert status(handle.run_id) == "paused"
    handle.send("approve", {"by": "ann"})  # stored; not read while paused

    page.locator('[data-action="resume"]').click()
    page.fill("textarea[name=why]", "maintenance over")
    page.locator('[data-confirm="resume"]').click()
    page.wait_for_url(f"**/{handle.run_id}/inspect/")
    wait_for(lambda: status(handle.run_id) == "completed", 30, "the resumed run to complete")
    audit = list(AuditEntry.objects.filter(run_id=handle.run_id).order_by("id"))
    assert [(a.action, a.actor, a.reason) for a in audit] == [
        ("pause", "operator", "CMS maintenance window"),
        ("resume", "operator", "maintenance over"),
    ]


def test_pause_a_workflow_from_the_dashboard_and_resume_it_from_its_row(page, processes):
    page.goto("/dashboard/")
    form = page.locator("[data-pause-workflow-form]")
    form.locator("input[name=workflow]").fill("approval")
    form.locator("input[name=why]").fill("CMS migration")
    form.locator("[data-pause-workflow]").click()

    page.wait_for_url("**/dashboard/#wf-paused-workflows")
    row = page.locator('[data-paused-workflow="approval"]')
    expect(row).to_contain_text("operator")
    expect(row).to_contain_text("CMS migration")
    assert [p.workflow for p in operations.paused_workflows()] == ["approval"]
    handle = flows.registry.client("approval").get_or_create(["post-p2"])
    processes.runner()

    row.locator("input[name=why]").fill("migration done")
    row.locator('[data-resume-workflow="approval"]').click()
    page.wait_for_url("**/dashboard/#wf-paused-workflows")
    expect(page.locator("[data-no-paused-workflows]")).to_be_visible()
    assert operations.paused_workflows() == []
    wait_for(lambda: status(handle.run_id) == "waiting", 30, "the run to be claimed once resumed")
