"""The inspector and the dashboard in real headless Chromium, against a real daphne process and a
real `runworkflows` process on the test database. Nothing waits on time: runs wait on messages the
test sends, a step fails while a flag file exists, and every check waits on a condition."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.support import wait_for
from workflows.models import AuditEntry, Entry, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def status(run_id: str) -> str:
    return Run.objects.get(id=run_id).status


def inspect_url(run_id: str) -> str:
    return f"/admin/workflows/run/{run_id}/inspect/"


def expect_status(page, value: str) -> None:
    # A runner process starting on a loaded 2-core machine can take longer than expect's 5 s.
    expect(page.locator("#run-live [data-run-status]")).to_have_attribute(
        "data-run-status", value, timeout=30_000
    )


def test_the_timeline_updates_live_while_the_runner_works(page, processes):
    handle = flows.registry.client("approval").get_or_create(["live-1"])
    page.goto(inspect_url(handle.run_id))
    expect(page.locator("[data-live-indicator].on")).to_be_visible()
    expect_status(page, "pending")
    page.evaluate("window.__notReloaded = true")

    processes.runner()  # the run is picked up while we watch
    expect_status(page, "waiting")
    expect(page.locator('[data-tl-row="draft"] [data-seg="ok"]')).to_be_visible()
    expect(page.locator('[data-tl-row="wait-approval"] [data-seg="wait"]')).to_be_visible()
    expect(page.locator('[data-entry="wait-approval"]')).to_have_attribute("data-entry-status", "waiting")

    handle.send("approve", {"by": "ann"})  # from this process; the runner and daphne see it in the DB
    expect_status(page, "completed")
    expect(page.locator('[data-tl-row="publish"] [data-seg="ok"]')).to_be_visible()
    expect(page.locator('[data-entry="wait-approval"]')).to_have_attribute("data-entry-status", "completed")
    expect(page.locator("tr[data-event-id]")).to_have_count(2)  # drafted, published
    assert page.evaluate("window.__notReloaded") is True  # all of it without a reload


def test_replay_a_failed_step_after_the_fix(page, processes):
    broken = processes.flag_dir / "charge-broken"
    broken.touch()
    handle = flows.registry.client("payment").get_or_create(["order-17"])
    processes.runner()
    page.goto(inspect_url(handle.run_id))
    expect_status(page, "failed")
    expect(page.locator(".wf-alert").first).to_contain_text("merchant account suspended")
    assert "sk_live_51Hx" not in page.content() and "tok_visa_4242" not in page.content()

    broken.unlink()  # the fix is deployed
    page.locator('[data-entry="charge"] > summary').get_by_text("Replay from here").click()
    expect(page.locator("[data-changes]")).to_contain_text("step “charge” (#1)")
    expect(page.locator("[data-changes]")).to_contain_text("pending: a runner picks it up now")
    page.fill("textarea[name=why]", "processor reinstated the merchant account")
    page.click("button[data-confirm=replay]")

    page.wait_for_url(f"**{inspect_url(handle.run_id)}")
    expect_status(page, "completed")
    expect(page.locator(".wf-step.superseded[data-entry=charge]")).to_be_visible()
    expect(page.locator("#audit-log")).to_contain_text("processor reinstated the merchant account")
    audit = AuditEntry.objects.get(run_id=handle.run_id)
    assert (audit.action, audit.actor) == ("replay", "operator")
    assert Entry.objects.filter(run_id=handle.run_id, name="charge").count() == 2


def test_cancel_a_waiting_run(page, processes):
    handle = flows.registry.client("approval").get_or_create(["cancel-1"])
    processes.runner()
    wait_for(lambda: status(handle.run_id) == "waiting", 30, "the run to wait for approval")
    page.goto(inspect_url(handle.run_id))
    page.get_by_role("link", name="Cancel run").click()
    expect(page.locator("[data-changes]")).to_contain_text("cancelled, at once")
    page.fill("textarea[name=why]", "customer withdrew the request")
    page.click("button[data-confirm=cancel]")
    expect_status(page, "cancelled")
    expect(page.get_by_role("link", name="Cancel run")).to_have_count(0)
    assert AuditEntry.objects.get(run_id=handle.run_id).reason == "customer withdrew the request"


def test_approve_from_the_run_page(page, processes):
    """The run page offers the decision its open wait is for; the form sends the operator as `by`."""
    handle = flows.registry.client("approval").get_or_create(["send-1"])
    processes.runner()
    wait_for(lambda: status(handle.run_id) == "waiting", 30, "the run to wait for approval")
    page.goto(inspect_url(handle.run_id))
    page.locator('[data-decision-links] a[data-choice="Approve"]').click()
    expect(page.locator("[data-changes]")).to_contain_text("woken: its open wait takes your decision")
    page.click('button[data-decide="Approve"]')
    expect_status(page, "completed")
    assert Run.objects.get(id=handle.run_id).result["approved_by"] == "operator"


def test_decide_from_the_dashboard_with_a_declared_choice(page, processes):
    """The `approval` workflow declares an Approve choice on its `approve` queue and labels: the
    dashboard lists the waiting run by its title, and the button opens the decision form, which
    sends the operator's name as `by`."""
    handle = flows.registry.client("approval").get_or_create(["decide-1"])
    processes.runner()
    wait_for(lambda: status(handle.run_id) == "waiting", 30, "the run to wait for approval")
    page.goto("/dashboard/")
    row = page.locator(f'tr[data-decision="{handle.run_id}"]')
    expect(row.locator("[data-label-title]")).to_have_text("Post decide-1")
    expect(row.locator('[data-label="stage"]')).to_contain_text("drafted")
    expect(row.locator("a[data-choice]")).to_have_count(1)
    row.locator('a[data-choice="Approve"]').click()
    expect(page.locator('button[data-decide="Approve"]')).not_to_have_class("wf-quiet")  # picked out
    assert json.loads(page.locator("[data-choice-body]").first.inner_text()) == {"by": "operator"}
    expect(page.locator("[data-changes]")).to_contain_text("woken: its open wait takes your decision")
    page.click('button[data-decide="Approve"]')
    expect_status(page, "completed")
    assert Run.objects.get(id=handle.run_id).result["approved_by"] == "operator"
    audit = AuditEntry.objects.get(run_id=handle.run_id)
    assert (audit.action, audit.actor, audit.reason) == ("send", "operator", "Approve (decision form)")
    page.goto("/dashboard/")
    expect(page.locator(f'tr[data-run="{handle.run_id}"] .wf-badge')).to_have_text("completed")
    expect(page.locator(f'tr[data-decision="{handle.run_id}"]')).to_have_count(0)


def test_dashboard_lists_runs_live(page, processes):
    processes.flag_dir.joinpath("charge-broken").touch()
    processes.runner()
    page.goto("/dashboard/")
    expect(page.locator("[data-live-indicator].on")).to_be_visible()

    showcase = flows.registry.client("aiJob").get_or_create(["job-2041"])
    expect(page.locator(f'tr[data-run="{showcase.run_id}"]')).to_be_visible()  # appears live
    for key in ("job-2042", "job-2043", "job-2044"):
        flows.registry.client("approval").get_or_create([key])
    failed = flows.registry.client("payment").get_or_create(["order-99"])
    wait_for(
        lambda: Entry.objects.filter(run_id=showcase.run_id, name="wait-approval", status="waiting").exists(),
        30,
        "the showcase to wait for approval",
    )
    wait_for(lambda: status(failed.run_id) == "failed", 30, "the payment to fail")
    showcase.send("approve", {"by": "dana"})
    flows.registry.client("approval").get(["job-2042"]).send("approve", {"by": "ann"})
    wait_for(lambda: status(showcase.run_id) == "completed", 30, "the showcase to complete")
    expect(page.locator(f'tr[data-run="{showcase.run_id}"] .wf-badge')).to_have_text("completed")
    expect(page.locator(f'tr[data-run="{failed.run_id}"] .wf-badge')).to_have_text("failed")
    approved = flows.registry.client("approval").get(["job-2042"]).run_id
    # Rows added live carry the labels the workflow declares, as the server-rendered ones do.
    expect(page.locator(f'tr[data-run="{approved}"] [data-label-title]')).to_have_text("Post job-2042")
    expect(page.locator("[data-step-stats]")).to_contain_text("extract")
    # A fresh load lists the two runs still waiting on their decision queue, with its buttons.
    page.reload()
    for key in ("job-2043", "job-2044"):
        waiting = flows.registry.client("approval").get([key]).run_id
        expect(page.locator(f'#wf-decisions tr[data-decision="{waiting}"]')).to_contain_text("Approve")

    # A finished run can no longer change by itself: its page claims no "live".
    page.goto(inspect_url(showcase.run_id))
    expect_status(page, "completed")
    expect(page.locator("[data-live-indicator]")).to_have_count(0)
