"""The dashboard's paused workflows: the table (workflow, since, who, why, its paused runs) with a
Resume button, and the form pausing a whole workflow; both need `inspector.pause_run`, ask why,
and are audited on the workflow's unfinished runs."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.inspector import flows
from workflows import operations
from workflows.models import AuditEntry, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db

DASHBOARD = reverse("inspector:dashboard")
PAUSE, RESUME = reverse("inspector:workflow_pause"), reverse("inspector:workflow_resume")


def staff(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_run", *perms]))
    return user


def waiting_approval(key: str) -> Run:
    handle = flows.registry.client("approval").get_or_create([key])
    run_until_idle(flows.registry)
    return Run.objects.get(id=handle.run_id)


def test_pause_a_workflow_from_the_dashboard_then_resume_it_from_its_row(client):
    run = waiting_approval("w1")
    held = waiting_approval("w2")
    operations.pause_run(str(held.id), actor="ops", reason="look at it")
    client.force_login(staff("oncall", "pause_run"))
    assert b"data-pause-workflow-form" in client.get(DASHBOARD).content

    done = client.post(PAUSE, {"workflow": "approval", "why": "CMS migration"})
    assert done.status_code == 302 and done.url.endswith("#wf-paused-workflows")
    [paused] = operations.paused_workflows()
    assert (paused.workflow, paused.actor, paused.reason) == ("approval", "oncall", "CMS migration")
    audit = AuditEntry.objects.get(run=run)
    assert (audit.action, audit.actor, audit.reason) == ("pause_workflow", "oncall", "CMS migration")

    page = client.get(DASHBOARD)
    [row] = page.context["paused_workflows"]
    assert (row.workflow, row.paused_runs) == ("approval", 1)
    html = page.content.decode()
    assert 'data-paused-workflow="approval"' in html and "CMS migration" in html
    assert 'data-resume-workflow="approval"' in html

    again = client.post(PAUSE, {"workflow": "approval", "why": "twice"})
    assert again.status_code == 409 and "already paused" in again.content.decode()

    assert client.post(RESUME, {"workflow": "approval", "why": "migrated"}).status_code == 302
    assert operations.paused_workflows() == []
    latest = AuditEntry.objects.filter(run=run).order_by("-id").first()
    assert (latest.action, latest.actor, latest.reason) == ("resume_workflow", "oncall", "migrated")
    assert Run.objects.get(id=held.id).status == "paused"  # paused one by one: stays paused
    assert b"data-no-paused-workflows" in client.get(DASHBOARD).content
    missing = client.post(RESUME, {"workflow": "approval", "why": "x"})
    assert missing.status_code == 409 and "not paused" in missing.content.decode()


def test_pausing_a_workflow_needs_a_reason(client):
    client.force_login(staff("oncall", "pause_run"))
    assert client.post(PAUSE, {"workflow": "approval", "why": " "}).status_code == 400
    assert operations.paused_workflows() == []


def test_pausing_or_resuming_a_workflow_needs_the_permission(client):
    operations.pause_workflow("flaky", actor="ops", reason="deploy")
    client.force_login(staff("viewer", "cancel_run", "replay_run", "retry_step_now"))
    html = client.get(DASHBOARD).content.decode()
    assert 'data-paused-workflow="flaky"' in html  # shown to whoever reads the dashboard ...
    assert "data-resume-workflow" not in html and "data-pause-workflow-form" not in html  # ... not offered
    refused = client.post(RESUME, {"workflow": "flaky", "why": "x"})
    assert refused.status_code == 403 and "inspector.pause_run" in refused.content.decode()
    assert client.post(PAUSE, {"workflow": "approval", "why": "x"}).status_code == 403
    assert [p.workflow for p in operations.paused_workflows()] == ["flaky"]
    assert client.get(RESUME).status_code == 405


def test_a_run_of_a_paused_workflow_says_so_on_its_page(client):
    run = waiting_approval("w3")
    operations.pause_workflow("approval", actor="ops", reason="CMS down")
    client.force_login(staff("viewer"))
    html = client.get(reverse("admin:workflows_run_inspect", args=[run.id])).content.decode()
    assert "data-workflow-paused" in html and "CMS down" in html
