"""The human-in-the-loop brief: it waits for an operator's approval, escalates when nobody
answers in time, publishes once approved, and stops when rejected."""

from __future__ import annotations

import json

import pytest
from django.core.management import call_command

from jobs.workflows import APPROVAL_TIMEOUT, registry
from workflows.core.exceptions import InvalidMessage
from workflows.models import AuditEntry
from workflows.testing import run_until_idle

from .conftest import SAMPLE

pytestmark = pytest.mark.django_db


def start(key: str = "review-1"):
    handle = registry.client("reviewedBrief").get_or_create([key])
    handle.send("start", {"title": "Discovery call", "transcript": SAMPLE})
    return handle


def stages(handle) -> list[str]:
    return [e.payload["stage"] for e in handle.events() if e.name == "progress"]


def test_review__approved_in_time_publishes_once_and_answers_the_approver(demo):
    handle = start()
    clock = run_until_idle(registry, advance=False)  # act before the approval times out
    run = handle.info()
    assert run.status == "waiting" and run.state["stage"] == "awaiting_approval"
    assert demo.posts == {}
    approval = handle.send("approval", {"decision": "approve", "by": "ann", "note": "ship it"})
    run_until_idle(registry, clock=clock)
    run = handle.info()
    assert run.status == "completed" and run.state["stage"] == "published"
    assert run.state["review"] == {"decision": "approve", "by": "ann", "note": "ship it"}
    assert len(demo.posts) == 1 and not run.state["escalated"]
    assert handle._client.store.get_message(approval.id).response == {"decision": "approve"}
    assert stages(handle)[-4:] == ["awaiting_approval", "approved", "publishing", "published"]


def test_review__rejected_never_publishes(demo):
    handle = start()
    run_until_idle(registry, advance=False)
    handle.send("approval", {"decision": "reject", "by": "bob"})
    run_until_idle(registry)
    run = handle.info()
    assert run.status == "completed" and run.result == {"rejected": True, "by": "bob"}
    assert run.state["stage"] == "rejected" and demo.posts == {}


def test_review__no_answer_in_time_escalates_then_still_takes_the_approval(demo):
    handle = start()
    clock = run_until_idle(registry)  # skips the whole approval window
    run = handle.info()
    assert run.status == "waiting" and run.state["stage"] == "escalated" and run.state["escalated"]
    wait = next(e for e in run_entries(handle) if e.name == "wait-approval")
    assert wait.output == {"messages": []}  # the timeout came back as no message
    assert (wait.finished_at - wait.started_at).total_seconds() >= APPROVAL_TIMEOUT
    handle.send("approval", {"decision": "approve", "by": "lead"})
    run_until_idle(registry, clock=clock)
    assert handle.info().state["stage"] == "published" and len(demo.posts) == 1


def test_review__an_approval_from_the_operator_command_is_audited(demo):
    handle = start()
    run_until_idle(registry, advance=False)
    body = json.dumps({"decision": "approve", "by": "ops"})
    call_command("workflows", "send", handle.run_id, "approval", "--body", body, "--reason", "reviewed")
    run_until_idle(registry)
    assert handle.info().state["stage"] == "published"
    audit = AuditEntry.objects.get(run_id=handle.run_id)
    assert audit.action == "send" and audit.reason == "reviewed"


def test_review__a_malformed_verdict_is_refused_and_changes_nothing(demo):
    handle = start()
    run_until_idle(registry, advance=False)
    with pytest.raises(InvalidMessage):
        handle.send("approval", {"decision": "maybe", "by": "ann"})
    run_until_idle(registry, advance=False)
    assert handle.info().state["stage"] == "awaiting_approval"


def run_entries(handle):
    from workflows.models import Entry

    return list(Entry.objects.filter(run_id=handle.run_id, superseded=False))


def test_review__the_dashboard_offers_approve_and_reject_through_the_decision_form(demo, admin_client):
    """The buttons and the labels come from what reviewedBrief declares: its `approval` queue's
    choices, note and shows (the brief), and `labels=("title", "stage")`."""
    import html
    import re

    handle = start()
    run_until_idle(registry, advance=False)
    other = registry.client("aiJob").get_or_create(["not-awaiting"])  # no decision queue: not listed

    page = admin_client.get("/dashboard/").content.decode()
    row = re.search(rf'<tr data-decision="{handle.run_id}">.*?</tr>', page, re.S)
    assert row and "<strong data-label-title>Discovery call</strong>" in row.group(0)
    assert re.search(r'data-label="stage">.*?awaiting_approval', row.group(0))
    assert re.findall(r'data-queue="approval" data-choice="(\w+)"', row.group(0)) == ["Approve", "Reject"]
    assert other.run_id not in re.search(r'id="wf-decisions".*?</table>', page, re.S).group(0)
    approve = html.unescape(re.search(r'href="([^"]+)">Approve', row.group(0)).group(1))

    form = admin_client.get(approve).content.decode()
    assert "&quot;decision&quot;: &quot;approve&quot;" in form and "&quot;by&quot;: &quot;admin&quot;" in form
    summary = handle.info().state["summary"]
    assert summary and html.escape(summary.splitlines()[0]) in form  # the brief being approved
    sent = admin_client.post(approve, {"choice": "Approve", "note": "brief checked"})
    assert sent.status_code == 302
    audit = AuditEntry.objects.get(run_id=handle.run_id)
    assert (audit.action, audit.actor, audit.reason) == ("send", "admin", "brief checked")
    run_until_idle(registry)
    review = handle.info().state["review"]
    assert review == {"decision": "approve", "by": "admin", "note": "brief checked"} and len(demo.posts) == 1
