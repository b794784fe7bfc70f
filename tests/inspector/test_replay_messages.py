"""The replay confirmation names the messages a replay from a wait delivers again (queue, sent at,
a masked preview) and offers to wait for new messages instead; either choice is audited."""

from __future__ import annotations

import pytest

from tests.inspector import flows
from tests.inspector.test_admin import entry, staff, start, url
from workflows.models import AuditEntry, Message, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


def failed_after_approval() -> tuple[Run, Message]:
    flows.FAIL.add("publish")
    handle = start("approval", "m1")
    handle.send("approve", {"by": "ann", "password": "hunter2"})
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "failed"
    return run, Message.objects.get(run=run)


def test_replay_from_a_wait__the_page_names_the_message_and_it_is_delivered_again(client):
    run, message = failed_after_approval()
    client.force_login(staff("fixer", "replay_run"))
    target = url("replay", run.id, entry(run, "wait-approval").id)

    page = client.get(target)

    listed = page.context["redelivered"]
    assert [(m["id"], m["queue"], m["sent_at"]) for m in listed] == [(message.id, "approve", message.sent_at)]
    html = page.content.decode()
    assert f'data-redelivered-message="{message.id}"' in html and "Messages delivered again" in html
    assert "hunter2" not in html and "••••••" in listed[0]["preview"] and '"by":"ann"' in listed[0]["preview"]
    assert 'name="wait_for_new"' in html

    assert client.post(target, {"why": "CMS fixed"}).status_code == 302
    assert AuditEntry.objects.get(run=run).details["redelivered"] == [{"id": message.id, "queue": "approve"}]
    flows.FAIL.clear()
    run_until_idle(flows.registry)
    done = Run.objects.get(id=run.id)
    assert done.status == "completed" and done.result["by"] == {"by": "ann", "password": "hunter2"}


def test_replay_from_a_wait__waiting_for_new_leaves_the_message_consumed(client):
    run, message = failed_after_approval()
    client.force_login(staff("fixer", "replay_run"))
    target = url("replay", run.id, entry(run, "wait-approval").id)

    assert client.post(target, {"why": "ask again", "wait_for_new": "on"}).status_code == 302

    audit = AuditEntry.objects.get(run=run)
    assert audit.details["redelivered"] == [] and audit.details["not_redelivered"][0]["id"] == message.id
    flows.FAIL.clear()
    run_until_idle(flows.registry)
    assert Run.objects.get(id=run.id).status == "waiting"


def test_replay_from_a_step_after_the_wait__lists_no_message_and_offers_no_choice(client):
    run, _ = failed_after_approval()
    client.force_login(staff("fixer", "replay_run"))
    html = client.get(url("replay", run.id, entry(run, "publish").id)).content.decode()
    assert "Messages delivered again" not in html and 'name="wait_for_new"' not in html
