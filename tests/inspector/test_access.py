"""Who may see what over HTTP: every read of runs (admin, dashboard and its pages) follows one
rule, `workflows.view_run`; an action refused for want of its permission is audited as a refusal,
and shown as one."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from inspector import access
from tests.inspector import flows
from workflows.models import AuditEntry, Entry, Message, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


def user(username: str, *codenames: str, staff: bool = True, active: bool = True) -> User:
    made = User.objects.create_user(username, password="pw", is_staff=staff, is_active=active)
    made.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=made.pk)  # a fresh object: no stale permission cache


def waiting_run(key: str) -> Run:
    handle = flows.registry.client("approval").get_or_create([key])
    run_until_idle(flows.registry)
    return Run.objects.get(id=handle.run_id)


def read_paths(run: Run) -> list[str]:
    return [
        reverse("inspector:dashboard"),
        reverse("inspector:stats"),
        reverse("inspector:run", args=[run.id]),
        reverse("admin:workflows_run_changelist"),
        reverse("admin:workflows_run_inspect", args=[run.id]),
        reverse("admin:workflows_run_fragment", args=[run.id]),
    ]


# --- the one rule -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("who", "allowed"),
    [
        (lambda: user("viewer", "view_run"), True),
        (lambda: user("changer", "change_run"), True),  # the admin counts change as view
        (lambda: User.objects.create_superuser("root", "r@example.com", "pw"), True),
        (lambda: user("staff-only"), False),
        (lambda: user("operator", "replay_run", "cancel_run", "send_message", "retry_step_now"), False),
        (lambda: user("not-staff", "view_run", staff=False), False),
        (lambda: user("gone", "view_run", active=False), False),
    ],
    ids=["view_run", "change_run", "superuser", "staff", "actions-only", "not-staff", "inactive"],
)
def test_can_view_runs(who, allowed):
    assert access.can_view_runs(who()) is allowed


def test_every_read_path_refuses_staff_without_view_run(client):
    run = waiting_run("r1")
    client.force_login(user("staff-only"))
    for path in read_paths(run):
        assert client.get(path).status_code == 403, path


def test_every_read_path_serves_staff_with_view_run(client):
    run = waiting_run("r2")
    client.force_login(user("viewer", "view_run"))
    for path in read_paths(run):  # the dashboard's run URL redirects to the admin's run page
        assert client.get(path, follow=True).status_code == 200, path


def test_the_dashboard_sends_anonymous_and_non_staff_users_to_the_login(client):
    run = waiting_run("r3")
    for path in read_paths(run)[:4]:
        response = client.get(path)
        assert response.status_code == 302 and "/admin/login/" in response["Location"], path
    client.force_login(user("not-staff", "view_run", staff=False))
    for path in read_paths(run)[:4]:
        assert client.get(path).status_code == 302, path


# --- refused actions are audited as refusals ------------------------------------------------------


def _post(run: Run, action: str) -> tuple[str, dict, dict]:
    """The URL and form of each action, and what its refusal's details must name."""
    entry = Entry.objects.get(run=run, name="wait-approval", superseded=False)
    forms = {
        "replay": (reverse("admin:workflows_run_replay", args=[run.id, entry.id]), {"why": "try"}, {"entry": entry.id}),
        "retry_now": (reverse("admin:workflows_run_retry", args=[run.id, entry.id]), {"why": "try"}, {"entry": entry.id}),
        "cancel": (reverse("admin:workflows_run_cancel", args=[run.id]), {"why": "try"}, {}),
        "send": (
            reverse("admin:workflows_run_send", args=[run.id]),
            {"queue": "approve", "body": '{"by": "mallory"}', "why": "try", "confirmed": "1"},
            {"queue": "approve"},
        ),
    }  # fmt: skip
    return forms[action]


PERMISSION = {
    "replay": "inspector.replay_run",
    "retry_now": "inspector.retry_step_now",
    "cancel": "inspector.cancel_run",
    "send": "inspector.send_message",
}


@pytest.mark.parametrize("action", list(PERMISSION))
@pytest.mark.parametrize("codenames", [("view_run",), ()], ids=["viewer", "no-view"])
def test_a_refused_action_is_audited_as_refused_and_shown_so(client, action, codenames):
    run = waiting_run(f"refuse-{action}")
    before = Run.objects.values("status", "updated_at", "cancel_requested").get(id=run.id)
    target, form, named = _post(run, action)
    client.force_login(user("mallory", *codenames))

    assert client.get(target).status_code == 403  # looking is not acting: nothing audited
    assert not AuditEntry.objects.exists()
    assert client.post(target, form).status_code == 403

    [audit] = AuditEntry.objects.all()
    assert (audit.run_id, audit.action, audit.actor, audit.reason) == (run.id, "refused", "mallory", "try")
    assert audit.details == {"attempted": action, "permission": PERMISSION[action], **named}
    # Nothing else happened.
    assert Run.objects.values("status", "updated_at", "cancel_requested").get(id=run.id) == before
    assert not Message.objects.filter(run=run).exclude(queue="start").exists()

    # The run's audit log and the audit entries' list show a refusal, never the action itself.
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    page = client.get(reverse("admin:workflows_run_inspect", args=[run.id])).content.decode()
    log = page[page.index('id="audit-log"') :]
    assert f'data-audit-refused="{action}"' in log and f"refused: {action}" in log
    assert audit.get_action_display() == "Refused"
    listing = client.get(reverse("admin:workflows_auditentry_changelist")).content.decode()
    assert f"refused: {action}" in listing


def test_a_refused_post_to_an_unknown_run_leaves_nothing(client):
    client.force_login(user("mallory", "view_run"))
    target = reverse("admin:workflows_run_cancel", args=["00000000-0000-4000-8000-000000000000"])
    assert client.post(target, {"why": "x"}).status_code == 403
    assert not AuditEntry.objects.exists()


def test_a_refusal_stores_what_was_typed_even_when_no_database_could(client):
    run = waiting_run("refuse-nul")
    client.force_login(user("mallory", "view_run"))
    target = reverse("admin:workflows_run_send", args=[run.id])
    assert client.post(target, {"queue": "app\x00rove", "body": "{}", "why": "a\x00b"}).status_code == 403
    audit = AuditEntry.objects.get(run=run)
    assert (audit.reason, audit.details["queue"]) == ("ab", "approve")
