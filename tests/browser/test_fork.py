"""Fork in real headless Chromium against daphne and a real runner: "Fork from here" on a step
opens a confirmation page (what is copied, what runs fresh, an optional key and input), the new
run's page says where it was forked from and links back, and the original's page links to it."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.support import wait_for
from workflows.models import AuditEntry, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_fork_from_a_failed_step_runs_a_new_run_and_both_pages_link(page, processes):
    processes.flag_dir.joinpath("charge-broken").touch()
    handle = flows.registry.client("payment").get_or_create(["order-8"])
    processes.runner()
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "failed", 30, "the payment to fail")
    processes.flag_dir.joinpath("charge-broken").unlink()  # the processor is fixed

    page.goto(f"/admin/workflows/run/{handle.run_id}/inspect/")
    charge = page.locator('details[data-entry="charge"]')
    charge.get_by_role("link", name="Fork from here").click()

    expect(page.locator('[data-fork-copied] [data-copied="reserve"]')).to_have_count(1)
    expect(page.locator('[data-fork-fresh] [data-fresh="charge"]')).to_have_count(1)
    expect(page.locator("[data-fork-key]")).to_have_attribute("placeholder", "order-8~fork-1")
    page.fill("textarea[name=why]", "processor fixed; try on a copy")
    page.locator('[data-confirm="fork"]').click()

    page.wait_for_url("**/inspect/")
    fork = Run.objects.get(forked_from_id=handle.run_id)
    assert page.url.endswith(f"/{fork.id}/inspect/") and fork.key == ["order-8~fork-1"]
    wait_for(lambda: Run.objects.get(id=fork.id).status == "completed", 30, "the fork to complete")
    back = page.locator("[data-run-forked-from]")
    expect(back).to_contain_text("forked from payment [order-8]")
    expect(back).to_contain_text("“charge”")
    assert Run.objects.get(id=handle.run_id).status == "failed"  # the original is untouched
    assert AuditEntry.objects.get(run=fork, action="fork").actor == "operator"

    back.get_by_role("link").click()
    page.wait_for_url(f"**/{handle.run_id}/inspect/")
    forks = page.locator("[data-run-forks]")
    expect(forks).to_contain_text("payment [order-8~fork-1]")
    forks.get_by_role("link").click()
    page.wait_for_url(f"**/{fork.id}/inspect/")


def test_each_root_step_offers_fork_from_here(page, processes):
    handle = flows.registry.client("payment").get_or_create(["order-9"])
    processes.runner()
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "completed", 30, "the payment")
    page.goto(f"/admin/workflows/run/{handle.run_id}/inspect/")
    expect(page.get_by_role("link", name="Fork from here")).to_have_count(2)  # reserve, charge
