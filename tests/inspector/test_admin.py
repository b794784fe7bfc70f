"""The run inspector in the admin: the list, one run's page, and every operator action with its
permission (403 without it), its confirmation page, its effect and its audit entry."""

from __future__ import annotations

import datetime as dt

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.inspector import flows
from workflows import conf
from workflows.core.ids import short_run_id
from workflows.engine.runner import Runner
from workflows.models import AuditEntry, Entry, Message, Run
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


# --- helpers ----------------------------------------------------------------------------------


def start(name: str, key: str):
    return flows.registry.client(name).get_or_create([key])


def waiting_approval(key: str = "a1") -> Run:
    handle = start("approval", key)
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "waiting"
    return run


def failed_approval(key: str = "f1") -> Run:
    flows.FAIL.add("publish")
    handle = start("approval", key)
    handle.send("approve", {"by": "ann"})
    run_until_idle(flows.registry)
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "failed"
    return run


def retrying_flaky(key: str = "r1") -> Run:
    """One real-clock pass: the first attempt fails and the retry is due in 60 s."""
    flows.FAIL.add("call")
    handle = start("flaky", key)
    runner = Runner(registry=flows.registry, store=conf.default_store(), watch=False)
    async_to_sync(runner.run_due)()
    run = Run.objects.get(id=handle.run_id)
    assert run.status == "waiting"
    return run


def entry(run: Run, name: str) -> Entry:
    return Entry.objects.get(run=run, name=name, superseded=False)


def staff(username: str, *perms: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    codenames = ["view_run", *perms]
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


@pytest.fixture
def admin_client(client):
    user = User.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(user)
    return client


def url(name: str, *args) -> str:
    return reverse(f"admin:workflows_run_{name}", args=args)


def assert_only_a_refusal(run: Run, attempted: str) -> AuditEntry:
    """The GET left nothing; the POST left one entry, a refusal naming the attempt."""
    [audit] = AuditEntry.objects.filter(run=run)
    assert audit.action == "refused" and audit.details["attempted"] == attempted
    return audit


# --- the list and the page --------------------------------------------------------------------


def test_run_list__columns_filters_and_search(admin_client):
    waiting = waiting_approval("list-1")
    failed = failed_approval("list-2")
    page = admin_client.get(url("changelist")).content.decode()
    short_waiting, short_failed = short_run_id(waiting.id), short_run_id(failed.id)
    for text in ("approval", "wait-approval", "v1", "list-1", short_waiting, "Failed only"):
        assert text in page
    only_failed = admin_client.get(url("changelist"), {"status__exact": "failed"}).content.decode()
    assert short_failed in only_failed and short_waiting not in only_failed
    # Time-ordered ids of one minute share their first digits: a start long enough to reach
    # the random ones finds one run; the short id the pages show (the last 8 digits) too.
    by_prefix = admin_client.get(url("changelist"), {"q": failed.id.hex[:20]}).content.decode()
    assert short_failed in by_prefix and short_waiting not in by_prefix
    by_short_id = admin_client.get(url("changelist"), {"q": short_waiting}).content.decode()
    assert short_waiting in by_short_id and short_failed not in by_short_id
    by_full_id = admin_client.get(url("changelist"), {"q": str(waiting.id)}).content.decode()
    assert short_waiting in by_full_id and short_failed not in by_full_id
    by_key = admin_client.get(url("changelist"), {"q": "list-2"}).content.decode()
    assert short_failed in by_key and short_waiting not in by_key
    by_version = admin_client.get(url("changelist"), {"workflow": "approval", "version": "v1"})
    assert by_version.status_code == 200 and "list-1" in by_version.content.decode()


def test_run_page__steps_attempts_usage_and_secrets_masked(admin_client):
    run = failed_approval()
    response = admin_client.get(url("inspect", run.id))
    assert response.status_code == 200
    page = response.content.decode()
    for text in ("prepare", "wait-approval", "publish", "the CMS rejected the post", "total_tokens", "150"):
        assert text in page
    assert "hunter2" not in page and "sk-live-abcdefghijklmnopqrstuv" not in page
    assert 'data-tl-row="publish"' in page  # the timeline has the step
    assert "Replay from here" in page


def test_run_page__links_a_parent_and_its_children_both_ways(admin_client):
    start("family", "fam")
    run_until_idle(flows.registry)
    parent = Run.objects.get(workflow="family")
    child = Run.objects.get(workflow="flaky", key=["fam-kid"])
    assert child.parent_id == parent.id
    parent_page = admin_client.get(url("inspect", parent.id)).content.decode()
    assert "data-run-children" in parent_page and url("inspect", child.id) in parent_page
    child_page = admin_client.get(url("inspect", child.id)).content.decode()
    assert "data-run-parent" in child_page and url("inspect", parent.id) in child_page


def test_limiter__the_waiting_step_and_the_dashboard_say_so(admin_client):
    start("metered", "m1")
    start("metered", "m2")
    run_until_idle(flows.registry, advance=False)
    waiting = Run.objects.get(workflow="metered", status="waiting")
    page = admin_client.get(url("inspect", waiting.id)).content.decode()
    assert "waiting for limiter crm (1 req/min)" in page
    assert "No attempt is spent while waiting" in page
    dashboard = admin_client.get(reverse("inspector:dashboard")).content.decode()
    row = dashboard[dashboard.index('data-limiter="crm"') :].split("</tr>")[0]
    cells = [c.split(">", 1)[1].split("<")[0] for c in row.split("<td")[1:]]
    assert cells == ["crm", "1 req/min", "0", "1", "0", "1"]


def test_change_view_redirects_to_the_inspector(admin_client):
    run = waiting_approval()
    response = admin_client.get(url("change", run.id))
    assert response.status_code == 302 and response["Location"] == url("inspect", run.id)


def test_run_page__needs_view_permission(client):
    run = waiting_approval()
    nobody = User.objects.create_user("nobody", password="pw", is_staff=True)
    client.force_login(nobody)
    assert client.get(url("inspect", run.id)).status_code == 403
    assert client.get(url("inspect", "00000000-0000-0000-0000-000000000000")).status_code in (403, 404)


# --- replay -----------------------------------------------------------------------------------


def test_replay__needs_its_permission(client):
    run = failed_approval()
    client.force_login(staff("viewer", "retry_step_now", "cancel_run", "send_message"))
    target = url("replay", run.id, entry(run, "publish").id)
    assert client.get(target).status_code == 403
    assert client.post(target, {"why": "fixed"}).status_code == 403
    assert Run.objects.get(id=run.id).status == "failed"
    assert_only_a_refusal(run, "replay")


def test_replay__confirmation_lists_what_changes_then_replays_and_audits(client):
    run = failed_approval()
    client.force_login(staff("fixer", "replay_run"))
    publish = entry(run, "publish")
    target = url("replay", run.id, publish.id)

    confirm = client.get(target)
    assert confirm.status_code == 200
    changes = [(c.what, c.before, c.after) for c in confirm.context["changes"]]
    assert changes[0][0] == "step “publish” (#2)" and "superseded" in changes[0][2]
    assert ("run status", "failed", "pending: a runner picks it up now") in changes
    assert confirm.context["kept"] == 2  # prepare and the queue wait stay

    no_reason = client.post(target, {"why": "  "})
    assert no_reason.status_code == 200 and Run.objects.get(id=run.id).status == "failed"

    done = client.post(target, {"why": "CMS credentials rotated"})
    assert done.status_code == 302 and done["Location"] == url("inspect", run.id)
    assert Run.objects.get(id=run.id).status == "pending"
    audit = AuditEntry.objects.get(run=run)
    assert (audit.action, audit.actor, audit.reason) == ("replay", "fixer", "CMS credentials rotated")
    assert audit.details["superseded"] == [publish.id]

    flows.FAIL.clear()
    run_until_idle(flows.registry)
    assert Run.objects.get(id=run.id).status == "completed"
    assert Entry.objects.filter(run=run, name="publish", superseded=True).count() == 1
    page = client.get(url("inspect", run.id)).content.decode()
    assert "Superseded history" in page and "CMS credentials rotated" in page


def test_replay__with_an_edited_input_keeps_masked_secrets(client):
    run = failed_approval()
    client.force_login(staff("fixer", "replay_run"))
    prepare = entry(run, "prepare")
    page = client.get(url("replay", run.id, prepare.id)).content.decode()
    assert "hunter2" not in page and "••••••" in page
    edited = '{"title": "new title", "password": "••••••"}'
    response = client.post(
        url("replay", run.id, prepare.id), {"why": "retitle", "edit_input": "on", "input": edited}
    )
    assert response.status_code == 302
    rerun = entry(run, "prepare")
    assert rerun.input == {"title": "new title", "password": "hunter2"}


# --- retry now --------------------------------------------------------------------------------


def test_retry_now__needs_its_permission(client):
    run = retrying_flaky()
    client.force_login(staff("viewer", "replay_run", "cancel_run", "send_message"))
    target = url("retry", run.id, entry(run, "call").id)
    assert client.get(target).status_code == 403
    assert client.post(target, {"why": "now"}).status_code == 403
    assert_only_a_refusal(run, "retry_now")


def test_retry_now__confirms_then_makes_the_attempt_due_and_audits(client):
    run = retrying_flaky()
    client.force_login(staff("oncall", "retry_step_now"))
    call = entry(run, "call")
    assert call.wake_at > dt.datetime.now(dt.UTC) + dt.timedelta(seconds=30)
    target = url("retry", run.id, call.id)
    confirm = client.get(target)
    assert confirm.status_code == 200
    assert [(c.what, c.after) for c in confirm.context["changes"]] == [
        ("step “call”: attempt 2", "due now"),
        ("run", "woken now"),
    ]
    done = client.post(target, {"why": "upstream is back"})
    assert done.status_code == 302
    assert entry(run, "call").wake_at <= dt.datetime.now(dt.UTC)
    audit = AuditEntry.objects.get(run=run)
    assert (audit.action, audit.actor, audit.reason) == ("retry_now", "oncall", "upstream is back")

    flows.FAIL.clear()
    runner = Runner(registry=flows.registry, store=conf.default_store(), watch=False)
    async_to_sync(runner.run_due)()  # real clock: only the hurried retry is due
    assert Run.objects.get(id=run.id).status == "completed"


def test_retry_now__refused_for_a_step_not_retrying(client):
    run = failed_approval()
    client.force_login(staff("oncall", "retry_step_now"))
    response = client.post(url("retry", run.id, entry(run, "publish").id), {"why": "x"})
    assert response.status_code == 409
    assert "Retry now does not apply to a failed run" in response.content.decode()
    assert not AuditEntry.objects.exists()


# --- cancel -----------------------------------------------------------------------------------


def test_cancel__needs_its_permission(client):
    run = waiting_approval()
    client.force_login(staff("viewer", "replay_run", "retry_step_now", "send_message"))
    assert client.get(url("cancel", run.id)).status_code == 403
    assert client.post(url("cancel", run.id), {"why": "x"}).status_code == 403
    assert not Run.objects.get(id=run.id).cancel_requested
    assert_only_a_refusal(run, "cancel")


def test_cancel__confirms_then_cancels_and_audits(client):
    run = waiting_approval()
    client.force_login(staff("oncall", "cancel_run"))
    confirm = client.get(url("cancel", run.id))
    assert confirm.status_code == 200
    assert confirm.context["changes"][0].before == "waiting"
    assert confirm.context["changes"][0].after.startswith("cancelled, at once")
    done = client.post(url("cancel", run.id), {"why": "customer withdrew"})
    assert done.status_code == 302
    audit = AuditEntry.objects.get(run=run)
    assert (audit.action, audit.actor, audit.reason) == ("cancel", "oncall", "customer withdrew")
    run_until_idle(flows.registry)
    assert Run.objects.get(id=run.id).status == "cancelled"
    assert "Cancel run" not in client.get(url("inspect", run.id)).content.decode()


# --- send -------------------------------------------------------------------------------------


def test_send__needs_its_permission(client):
    run = waiting_approval()
    client.force_login(staff("viewer", "replay_run", "retry_step_now", "cancel_run"))
    assert client.get(url("send", run.id)).status_code == 403
    data = {"queue": "approve", "body": '{"by": "x"}', "why": "x", "confirmed": "1"}
    assert client.post(url("send", run.id), data).status_code == 403
    assert not Message.objects.exists()
    assert_only_a_refusal(run, "send")


def test_send__previews_then_sends_and_audits(client):
    run = waiting_approval()
    client.force_login(staff("approver", "send_message"))
    form = client.get(url("send", run.id))
    assert form.status_code == 200 and 'value="approve"' in form.content.decode()

    preview = client.post(
        url("send", run.id),
        {"queue": "approve", "body": '{"by": "ann", "token": "t0k"}', "why": "approved on call"},
    )
    assert preview.status_code == 200 and preview.context["preview"]["queue"] == "approve"
    assert "t0k" not in preview.content.decode().split("<form")[0]  # the preview masks it
    assert [c.after for c in preview.context["changes"]][1].startswith("woken")
    assert not Message.objects.exists()  # nothing stored before the confirmation

    done = client.post(
        url("send", run.id),
        {
            "queue": "approve",
            "body": '{"by": "ann", "token": "t0k"}',
            "why": "approved on call",
            "confirmed": "1",
        },
    )
    assert done.status_code == 302
    message = Message.objects.get(run=run)
    assert message.body == {"by": "ann", "token": "t0k"}
    audit = AuditEntry.objects.get(run=run)
    assert (audit.action, audit.actor, audit.reason) == ("send", "approver", "approved on call")
    assert audit.details == {"queue": "approve", "message": message.id}
    run_until_idle(flows.registry)
    assert Run.objects.get(id=run.id).status == "completed"


def test_send__bad_json_is_a_form_error(client):
    run = waiting_approval()
    client.force_login(staff("approver", "send_message"))
    response = client.post(
        url("send", run.id), {"queue": "approve", "body": "{nope", "why": "x", "confirmed": "1"}
    )
    assert response.status_code == 200 and "Not valid JSON" in response.content.decode()
    assert not Message.objects.exists()


# --- dashboard and links ----------------------------------------------------------------------


def test_dashboard__staff_only(client):
    assert client.get("/dashboard/").status_code == 302  # to the admin login
    client.force_login(User.objects.create_user("plain", password="pw"))
    assert client.get("/dashboard/").status_code == 302


def test_dashboard__counts_rates_and_step_durations(admin_client):
    waiting_approval("d1")
    failed_approval("d2")
    response = admin_client.get("/dashboard/")
    assert response.status_code == 200
    stats = response.context["stats"]
    assert stats.counts["waiting"] == 1 and stats.counts["failed"] == 1
    assert stats.failed_last_hour == 1 and stats.failure_rate == 1.0
    assert [(s.workflow, s.name, s.count) for s in stats.step_stats] == [("approval", "prepare", 2)]
    page = response.content.decode()
    assert "d1" in page and "d2" in page and "100.0 %" in page
    run_page = admin_client.get(
        reverse("inspector:run", args=[Run.objects.get(key_text='["d1"]').id]), follow=True
    )
    assert run_page.status_code == 200 and "wait-approval" in run_page.content.decode()


def test_admin_index_links_the_dashboard(admin_client):
    page = admin_client.get(reverse("admin:index")).content.decode()
    assert 'href="/dashboard/"' in page


def test_run_page__errors_and_tracebacks_are_masked(admin_client):
    run = retrying_flaky()
    page = admin_client.get(url("inspect", run.id)).content.decode()
    assert "upstream 503" in page and "abc123secret" not in page
    assert "Retry now" in page and "next attempt in" in page
