"""Schedules in the Django admin (Django's test client, real database): the list and a schedule's
page (next 5 fire times, last runs linking to the run inspector), pause and resume through a
confirmation page that asks why, and only for users with `workflows.change_schedule`."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from asgiref.sync import async_to_sync
from django.contrib.admin.models import LogEntry
from django.contrib.auth.models import Permission, User
from django.core.management import CommandError, call_command
from django.urls import reverse

from workflows import FakeClock, conf, schedule, setup, workflow
from workflows.engine.scheduler import Scheduler
from workflows.models import Schedule

pytestmark = pytest.mark.django_db


async def nightly_body(ctx):
    return ctx.state["$schedule"]["fire_time"]


registry = setup(
    use={"nightly": workflow(nightly_body)},
    schedules=[schedule("0 2 * * *", "nightly", timezone="Europe/Paris")],
)


@pytest.fixture(autouse=True)
def _registry(settings):
    settings.WORKFLOWS = {
        **settings.WORKFLOWS,
        "REGISTRIES": ["tests.integration.test_schedule_admin.registry"],
    }
    conf.registry.cache_clear()
    yield
    conf.registry.cache_clear()


def user(username: str, *codenames: str) -> User:
    made = User.objects.create_user(username, password="pw", is_staff=True)
    made.user_permissions.set(Permission.objects.filter(codename__in=codenames))
    return User.objects.get(pk=made.pk)


def fired_once() -> tuple[Scheduler, FakeClock]:
    """The schedule synced and fired once, as a runner would."""
    clock = FakeClock(dt.datetime.now(dt.UTC))
    scheduler = Scheduler(registry=registry, store=conf.default_store(), clock=clock)
    async_to_sync(scheduler.sync)()
    clock.set(Schedule.objects.get().next_fire_at)
    assert async_to_sync(scheduler.tick)() == 1
    return scheduler, clock


def act(client, action: str, why: str | None = None):
    data = {"action": action, "_selected_action": [Schedule.objects.get().pk]}
    if why is not None:
        data |= {"apply": "1", "why": why}
    return client.post(reverse("admin:workflows_schedule_changelist"), data, follow=True)


def test_list_and_page__show_state_next_five_fire_times_and_last_runs_linking_to_the_inspector(client):
    fired_once()
    client.force_login(user("viewer", "view_schedule"))
    listing = client.get(reverse("admin:workflows_schedule_changelist")).content.decode()
    assert "nightly" in listing and "0 2 * * *" in listing and "active" in listing
    row = Schedule.objects.get()
    page = client.get(reverse("admin:workflows_schedule_change", args=[row.pk])).content.decode()
    assert page.count("<li>") >= 5 + 1  # five fire times ahead, one run behind
    run_id = row.last_runs[0]["run_id"]
    assert reverse("admin:workflows_run_inspect", args=[run_id]) in page
    assert 'name="_save"' not in page  # declared in code: nothing to save


def test_pause_and_resume__confirmed_with_a_reason_audited_and_honoured_by_runners(client):
    scheduler, clock = fired_once()
    operator = user("operator", "view_schedule", "change_schedule")
    client.force_login(operator)
    confirm = act(client, "pause")
    assert b"Pause schedules" in confirm.content and b"data-confirm-schedules" in confirm.content
    assert not Schedule.objects.get().paused  # a confirmation page changes nothing
    act(client, "pause", why="   ")
    assert not Schedule.objects.get().paused  # no reason, no pause
    done = act(client, "pause", why="database maintenance")
    assert b"Paused: nightly" in done.content
    row = Schedule.objects.get()
    assert (row.paused, row.paused_by, row.pause_reason) == (True, "operator", "database maintenance")
    assert LogEntry.objects.get(object_id=str(row.pk)).change_message == "Paused: database maintenance"
    clock.set(row.next_fire_at + dt.timedelta(days=2))
    assert async_to_sync(scheduler.tick)() == 0  # paused: the runner starts nothing
    act(client, "resume", why="maintenance over")
    row = Schedule.objects.get()
    assert not row.paused and row.next_fire_at > dt.datetime.now(dt.UTC)
    assert len(row.last_runs) == 1


def test_pause__refused_without_change_schedule(client):
    fired_once()
    client.force_login(user("viewer", "view_schedule"))
    act(client, "pause", why="because")
    assert not Schedule.objects.get().paused
    assert not LogEntry.objects.exists()


def test_schedules_are_not_added_or_deleted_in_the_admin(client):
    fired_once()
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    assert client.get(reverse("admin:workflows_schedule_add")).status_code == 403
    row = Schedule.objects.get()
    assert client.get(reverse("admin:workflows_schedule_delete", args=[row.pk])).status_code == 403


def run_command(*args: str) -> str:
    out = io.StringIO()
    call_command("workflows", *args, stdout=out)
    return out.getvalue()


def test_commands__list_pause_and_resume_schedules():
    fired_once()
    assert "nightly  active  nightly  '0 2 * * *' Europe/Paris  catch_up skip" in run_command("schedules")
    assert "schedule 'nightly' is paused." in run_command(
        "schedule", "pause", "nightly", "--reason", "freeze"
    )
    row = Schedule.objects.get()
    assert row.paused and row.paused_by.startswith("cli:") and row.pause_reason == "freeze"
    assert "nightly  paused" in run_command("schedules")
    assert "is active, next fire" in run_command("schedule", "resume", "nightly", "--reason", "thaw")
    assert not Schedule.objects.get().paused
    with pytest.raises(CommandError, match="no schedule named 'nope'"):
        run_command("schedule", "pause", "nope", "--reason", "x")
