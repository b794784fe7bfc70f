"""The dashboard's runners and a run's "no runner" banner in real headless Chromium, against a
real daphne and a real `runworkflows`: both say no runner is alive until one starts, then the
runner shows up and the banner goes, without a reload."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import flows

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
STARTUP = 120_000  # ms: how long a runner process may take to start on a loaded machine


def test_no_runner__said_until_one_starts_then_it_is_listed(page, processes):
    handle = flows.registry.client("approval").get_or_create(["runners-1"])
    page.goto(f"/admin/workflows/run/{handle.run_id}/inspect/")
    expect(page.locator("[data-runner-banner]")).to_contain_text("No runner is alive")
    page.goto("/dashboard/")
    expect(page.locator("[data-live-indicator].on")).to_be_visible()
    expect(page.locator("[data-no-runner]")).to_be_visible()
    expect(page.locator("[data-unserved]")).to_have_attribute("data-unserved", "1")

    runner = processes.runner()  # it takes the run, which refreshes the figures and the runners
    row = page.locator(f'tr[data-runner*=":{runner.pid}:"]')
    expect(row).to_have_attribute("data-alive", "1", timeout=STARTUP)  # a busy machine starts it slowly
    expect(row).to_contain_text("approval")
    expect(page.locator("[data-no-runner]")).to_have_count(0)
    expect(page.locator("[data-unserved]")).to_have_count(0)

    page.goto(f"/admin/workflows/run/{handle.run_id}/inspect/")
    expect(page.locator("#run-live [data-run-status]")).to_have_attribute("data-run-status", "waiting")
    expect(page.locator("[data-runner-banner]")).to_have_count(0)
