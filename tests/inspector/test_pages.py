"""The operators' pages tell the truth: a failure repaired since still counts on the dashboard, and
so does every failed attempt; "live" shows only on runs that can still change; a user who may not
see a page gets a 403 in the site's look saying which permission is missing; the dashboard's run
URL leads to the admin's run page."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from tests.inspector import flows
from workflows import operations
from workflows.models import Entry, Run
from workflows.reads.stats import dashboard_stats
from workflows.testing import run_until_idle

pytestmark = pytest.mark.django_db


def run_of(name: str, key: str, *, approve: bool = False) -> Run:
    handle = flows.registry.client(name).get_or_create([key])
    if approve:
        handle.send("approve", {"by": "ann"})
    run_until_idle(flows.registry)
    return Run.objects.get(id=handle.run_id)


@pytest.fixture
def admin_client(client):
    client.force_login(User.objects.create_superuser("root", "root@example.com", "pw"))
    return client


# --- the dashboard's failure figures ----------------------------------------------------------


def test_a_failed_run_repaired_since_still_counts_as_a_failure_and_every_failed_attempt_counts():
    ok = run_of("approval", "ok", approve=True)
    flows.FAIL.add("publish")
    repaired = run_of("approval", "repaired", approve=True)
    still_failed = run_of("approval", "still-failed", approve=True)
    assert (ok.status, repaired.status, still_failed.status) == ("completed", "failed", "failed")
    flows.FAIL.clear()  # the fix; the operator replays one of the two
    publish = Entry.objects.get(run=repaired, name="publish", superseded=False)
    operations.replay_from(str(repaired.id), publish.id, actor="ann", reason="CMS fixed")
    run_until_idle(flows.registry)
    assert Run.objects.get(id=repaired.id).status == "completed"

    stats = dashboard_stats()
    # Two runs failed this hour: one is still failed, one was repaired and completed since.
    assert (stats.failed_last_hour, stats.repaired_last_hour, stats.completed_last_hour) == (2, 1, 1)
    assert stats.failure_rate == pytest.approx(2 / 3)
    # 3 prepare + 3 publish + the replayed publish; the two critical publishes failed.
    assert (stats.attempts_last_hour, stats.failed_attempts_last_hour) == (7, 2)
    assert sum(b["failed"] for b in stats.buckets) == 2


def test_the_dashboard_shows_failed_attempts_and_repaired_runs(admin_client):
    flows.FAIL.add("publish")
    failed = run_of("approval", "f", approve=True)
    flows.FAIL.clear()
    publish = Entry.objects.get(run=failed, name="publish", superseded=False)
    operations.replay_from(str(failed.id), publish.id, actor="ann", reason="fixed")
    run_until_idle(flows.registry)
    page = admin_client.get(reverse("inspector:stats")).content.decode()
    assert "data-failed-runs>1<" in page and "1 repaired since" in page
    assert "data-failed-attempts>1<" in page and "of 3" in page
    assert "data-failure-rate>100.0 %<" in page


# --- "live" only where the run can still change -----------------------------------------------


@pytest.mark.parametrize("page", ["admin:workflows_run_inspect", "inspector:run"])
def test_live_indicator_only_on_runs_that_can_still_change(admin_client, page):
    waiting = run_of("approval", "w")
    completed = run_of("approval", "c", approve=True)
    flows.FAIL.add("publish")
    failed = run_of("approval", "f", approve=True)
    cancelled = run_of("approval", "x")
    operations.cancel(str(cancelled.id), actor="ann", reason="withdrawn")
    run_until_idle(flows.registry)
    for run, live in ((waiting, True), (completed, False), (failed, False), (cancelled, False)):
        run.refresh_from_db()
        html = admin_client.get(reverse(page, args=[run.id]), follow=True).content.decode()
        assert ("data-live-indicator" in html) is live, (run.status, page)


# --- one run page: the admin's -----------------------------------------------------------------


def test_the_dashboards_run_url_redirects_to_the_admins_run_page(client):
    run = run_of("approval", "r")
    client.force_login(staff("viewer", "view_run"))  # may read runs, may act on nothing
    response = client.get(reverse("inspector:run", args=[run.id]))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:workflows_run_inspect", args=[run.id])
    page = client.get(response["Location"])
    assert page.status_code == 200 and "data-live-run" in page.content.decode()
    assert reverse("admin:workflows_run_fragment", args=[run.id]) in page.content.decode()


# --- 403 in the site's look -------------------------------------------------------------------


def staff(username: str, *codenames: str) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return user


def assert_styled_403(response, *, needs: str, user: str) -> str:
    page = response.content.decode()
    assert response.status_code == 403
    assert '<header id="header">' in page and "inspector/inspector.css" in page  # the admin's look
    assert "You may not see this page" in page and needs in page
    assert f"data-forbidden-user>{user}<" in page and "Log out" in page
    return page


def test_403__staff_without_view_run_on_the_dashboard_and_the_inspector(client):
    run = run_of("approval", "p")
    client.force_login(staff("guest"))
    for url in (
        "/dashboard/",
        reverse("inspector:run", args=[run.id]),
        reverse("admin:workflows_run_inspect", args=[run.id]),
    ):
        assert_styled_403(client.get(url), needs="workflows.view_run", user="guest")


def test_403__an_action_names_its_permission_and_says_the_attempt_is_audited(client):
    run = run_of("approval", "q")
    client.force_login(staff("viewer", "view_run"))
    url = reverse("admin:workflows_run_cancel", args=[run.id])
    page = assert_styled_403(client.get(url), needs="inspector.cancel_run", user="viewer")
    assert "recorded in the run's audit log" not in page  # looking is not attempting
    page = assert_styled_403(client.post(url, {"why": "x"}), needs="inspector.cancel_run", user="viewer")
    assert "Your attempt is recorded in the run&#x27;s audit log." in page
