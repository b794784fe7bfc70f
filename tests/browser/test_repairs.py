"""The repair pages in real headless Chromium against daphne and a real runner: a repair that does
not apply is not offered, the replay page lists the external calls that run again and the messages
it delivers again, and the cancel page lists the compensations that will run (and cancelling runs
them)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser import flows
from tests.support import wait_for
from workflows.models import Entry, Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def failed_payment(processes) -> Run:
    processes.flag_dir.joinpath("charge-broken").touch()
    handle = flows.registry.client("payment").get_or_create(["order-7"])
    processes.runner()
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "failed", 30, "the payment to fail")
    return Run.objects.get(id=handle.run_id)


def test_a_failed_run_offers_replay_only_and_the_replay_page_lists_the_calls(page, processes):
    run = failed_payment(processes)
    page.goto(f"/admin/workflows/run/{run.id}/inspect/")
    charge = page.locator('details[data-entry="charge"]')
    expect(charge).to_have_attribute("data-entry-status", "failed")
    expect(page.get_by_role("link", name="Cancel run")).to_have_count(0)
    expect(page.get_by_role("link", name="Retry now")).to_have_count(0)
    expect(charge.get_by_role("link", name="Replay from here")).to_have_count(1)

    charge.get_by_role("link", name="Replay from here").click()
    again = page.locator("[data-runs-again]")
    expect(again).to_contain_text("Steps that will run again")
    expect(again.locator('[data-step-again="charge"]')).to_have_text(
        "charge will charge the card again, under a new idempotency key."
    )
    expect(again.locator('[data-step-again="reserve"]')).to_have_count(0)  # kept: it does not run again


def test_a_waiting_run_with_compensations_lists_them_before_cancel_and_runs_them(page, processes):
    handle = flows.registry.client("booking").get_or_create(["trip-1"])
    processes.runner()
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "waiting", 30, "the booking to wait")
    page.goto(f"/admin/workflows/run/{handle.run_id}/inspect/")
    expect(page.get_by_role("link", name="Replay from here").first).to_be_visible()
    page.get_by_role("link", name="Cancel run").click()

    listed = page.locator("[data-compensations] [data-compensation]")
    expect(listed).to_have_count(2)
    expect(listed.nth(0)).to_have_attribute("data-compensation", "charge-card")
    expect(listed.nth(1)).to_have_attribute("data-compensation", "reserve-seat")
    expect(page.locator("[data-compensations]")).to_contain_text("runs the rollbacks of its completed steps")

    page.fill("textarea[name=why], input[name=why]", "the customer called it off")
    page.locator('[data-confirm="cancel"]').click()
    page.wait_for_url(f"**/{handle.run_id}/inspect/")
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "cancelled", 30, "the cancel")
    undone = Entry.objects.filter(run_id=handle.run_id, scope="~rollback").order_by("position")
    assert [e.name for e in undone] == ["charge-card", "reserve-seat"]

    page.reload()
    expect(page.get_by_role("link", name="Cancel run")).to_have_count(0)
    expect(page.get_by_role("link", name="Retry now")).to_have_count(0)


def test_a_replay_from_a_wait_names_the_message_it_delivers_again_and_the_run_ends_again(page, processes):
    handle = flows.registry.client("approval").get_or_create(["post-9"])
    message = handle.send("approve", {"by": "ann"})
    processes.runner()
    wait_for(lambda: Run.objects.get(id=handle.run_id).status == "completed", 30, "the approval to finish")
    wait = Entry.objects.get(run_id=handle.run_id, name="wait-approval")
    page.goto(f"/admin/workflows/run/{handle.run_id}/inspect/")
    page.locator('details[data-entry="wait-approval"]').get_by_role("link", name="Replay from here").click()

    listed = page.locator("[data-redelivered] [data-redelivered-message]")
    expect(listed).to_have_count(1)
    expect(listed.first).to_have_attribute("data-redelivered-message", str(message.id))
    expect(listed.first).to_contain_text("approve")
    expect(listed.first).to_contain_text('{"by":"ann"}')
    expect(page.locator("[data-wait-for-new]")).not_to_be_checked()

    page.fill("textarea[name=why], input[name=why]", "publish it again")
    page.locator('[data-confirm="replay"]').click()
    page.wait_for_url(f"**/{handle.run_id}/inspect/")

    def ended_again() -> bool:
        retaken = Entry.objects.filter(run_id=handle.run_id, name="wait-approval", superseded=False)
        return (
            retaken.exclude(id=wait.id).exists() and Run.objects.get(id=handle.run_id).status == "completed"
        )

    wait_for(ended_again, 30, "the replayed run to take the approval again and finish")
