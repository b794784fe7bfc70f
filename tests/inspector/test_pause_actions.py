"""Pause and resume in the run inspector: each needs `inspector.pause_run` (403 without it, and a
`refused` audit entry for a POST), shows a confirmation page saying what changes, then pauses or
resumes the run and audits it with the user's name; a paused run's page says who paused it and
why, and the due time it keeps; a run paused by on_exhausted="pause" names its step out of
retries and its last error (masked), offering resume, retry now, replay and cancel."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.inspector import flows
from workflows import operations
from workflows.models import AuditEntry, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


def waiting_approval(key: str = "p1") -> Run:
    handle = flows.registry.client("approval").get_or_create([key])
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "waiting"
    return run


def staff(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=["view_run", *perms]))
    return user


def url(name: str, *args) -> str:
    return reverse(f"admin:workflows_run_{name}", args=args)


def test_pause_and_resume__need_their_permission_and_a_post_leaves_a_refusal(client):
    run = waiting_approval()
    client.force_login(staff("viewer", "cancel_run", "replay_run", "retry_step_now", "fork_run"))
    page = client.get(url("inspect", run.id)).content.decode()
    assert "Pause run" not in page
    assert client.get(url("pause", run.id)).status_code == 403
    refused = client.post(url("pause", run.id), {"why": "vendor down"})
    assert refused.status_code == 403 and "inspector.pause_run" in refused.content.decode()
    assert Run.objects.get(id=run.id).status == "waiting"
    [audit] = AuditEntry.objects.filter(run=run)
    assert (audit.action, audit.details["attempted"], audit.details["permission"]) == (
        "refused",
        "pause",
        "inspector.pause_run",
    )

    operations.pause_run(str(run.id), actor="ops", reason="vendor down")
    assert "Resume run" not in client.get(url("inspect", run.id)).content.decode()
    assert client.post(url("resume", run.id), {"why": "back"}).status_code == 403
    assert Run.objects.get(id=run.id).status == "paused"
    assert AuditEntry.objects.filter(run=run, action="refused", details__attempted="resume").count() == 1


def test_pause__confirms_then_pauses_audits_and_the_page_says_who_and_why(client):
    run = waiting_approval()
    client.force_login(staff("oncall", "pause_run"))
    assert 'data-action="pause"' in client.get(url("inspect", run.id)).content.decode()
    confirm = client.get(url("pause", run.id))
    assert confirm.status_code == 200
    assert confirm.context["changes"][0].before == "waiting"
    assert confirm.context["changes"][0].after.startswith("paused at once")
    assert client.post(url("pause", run.id), {"why": "  "}).status_code == 200  # a reason is required
    assert not AuditEntry.objects.filter(run=run).exists()

    done = client.post(url("pause", run.id), {"why": "vendor outage INC-7"})
    assert done.status_code == 302 and done.url == url("inspect", run.id)
    assert Run.objects.get(id=run.id).status == "paused"
    audit = AuditEntry.objects.get(run=run)
    assert (audit.action, audit.actor, audit.reason) == ("pause", "oncall", "vendor outage INC-7")

    page = client.get(url("inspect", run.id))
    facts = page.context["pause"]
    assert (facts.paused, facts.by, facts.reason, facts.exhausted) == (
        True,
        "oncall",
        "vendor outage INC-7",
        None,
    )
    html = page.content.decode()
    assert "data-paused-by" in html and "vendor outage INC-7" in html and "data-paused-due" in html
    assert 'data-action="pause"' not in html and 'data-action="resume"' in html
    assert client.post(url("pause", run.id), {"why": "again"}).status_code == 409  # already paused


def test_resume__confirms_then_resumes_audits_and_the_run_goes_on(client):
    run = waiting_approval()
    operations.pause_run(str(run.id), actor="ops", reason="hold")
    client.force_login(staff("oncall", "pause_run"))
    confirm = client.get(url("resume", run.id))
    assert confirm.status_code == 200 and confirm.context["changes"][0].before == "paused"
    done = client.post(url("resume", run.id), {"why": "vendor back"})
    assert done.status_code == 302
    assert Run.objects.get(id=run.id).status == "waiting"
    latest = AuditEntry.objects.filter(run=run).order_by("-id").first()
    assert (latest.action, latest.actor, latest.reason) == ("resume", "oncall", "vendor back")
    assert client.get(url("inspect", run.id)).context["pause"] is None
    refused = client.post(url("resume", run.id), {"why": "again"})
    assert refused.status_code == 409 and "not paused" in refused.content.decode()
    assert AuditEntry.objects.filter(run=run).count() == 2  # a refused repair writes nothing


def test_a_run_paused_by_on_exhausted_names_its_step_and_last_error_and_offers_the_repairs(admin_client):
    flows.FAIL.add("stubborn")
    handle = flows.registry.client("stubborn").get_or_create(["s1"])
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "paused"
    page = admin_client.get(url("inspect", run.id))
    facts = page.context["pause"]
    assert facts.exhausted.entry.name == "call" and facts.by == ""
    html = page.content.decode()
    assert "data-paused-by-exhausted" in html and "ran out of retries" in html
    assert "vendor down" in html and "abc123secret" not in html  # masked like every error
    call = facts.exhausted.entry
    for target in (
        url("resume", run.id),
        url("retry", run.id, call.id),
        url("replay", run.id, call.id),
        url("cancel", run.id),
    ):
        assert target in html, target

    flows.FAIL.clear()
    assert admin_client.post(url("resume", run.id), {"why": "vendor fixed"}).status_code == 302
    run_until_idle(flows.registry)
    assert Run.objects.get(id=run.id).status == "completed"
    assert AuditEntry.objects.get(run=run).actor == "root"


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


def test_paused_runs_list_as_paused_and_the_status_filter_offers_it(admin_client):
    run = waiting_approval()
    operations.pause_run(str(run.id), actor="ops")
    listing = admin_client.get(reverse("admin:workflows_run_changelist") + "?status__exact=paused")
    html = listing.content.decode()
    assert listing.status_code == 200 and str(run.id)[-8:] in html
    assert 'wf-badge wf-paused">paused' in html
    assert "status__exact=paused" in html  # the filter lists it
