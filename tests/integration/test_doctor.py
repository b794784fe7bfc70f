"""`manage.py workflows doctor [--fix]`: each kind of stuck thing made for real (through the
store where it can arise so, by a direct write where only a crash leaves it), found, repaired
when that is safe and then not found again; the exit status, the JSON, the dashboard's count and
the runner's gauge."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest
from django.contrib.auth.models import Permission, User
from django.core.cache import cache
from django.core.management import call_command
from django.urls import reverse
from prometheus_client import REGISTRY

from workflows import Concurrency, conf, setup, workflow
from workflows import doctor as repairs
from workflows.core.records import (
    CHILD_QUEUE_PREFIX,
    EntryKind,
    EntryStatus,
    OutgoingMessage,
    RunnerRecord,
    RunStatus,
)
from workflows.models import AuditEntry, Entry, LimiterSlot, Message, Run, Schedule
from workflows.reads import doctor as checks
from workflows.storage.django import DjangoStore

pytestmark = pytest.mark.django_db(transaction=True)


async def _body(ctx):
    return "ok"


registry = setup(
    use={
        "wf": workflow(_body, version="v2"),
        "grouped": workflow(_body, version="v1", concurrency=Concurrency(max=1, key=lambda run: run.key[0])),
    }
)


@pytest.fixture(autouse=True)
def configured(settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "REGISTRIES": ["tests.integration.test_doctor.registry"]}
    conf.registry.cache_clear()
    cache.clear()
    yield
    conf.registry.cache_clear()
    cache.clear()


def _now() -> dt.datetime:
    return DjangoStore().shared_clock.now()


def _serve(*names: str, owner: str = "live-runner") -> None:
    """A live runner's presence, serving `names` at the registry's versions."""
    now = _now()
    versions = registry.versions()
    DjangoStore().register_runner(
        RunnerRecord(
            owner=owner, host="h", pid=1, machine="", process_start="", started_at=now, last_seen=now,
            lease_seconds=30.0, concurrency=10, workflows={n: versions[n] for n in names},
        )
    )  # fmt: skip


def _start(workflow_name: str, key: str) -> str:
    return registry.client(workflow_name, store=DjangoStore()).get_or_create([key]).run_id


def _doctor(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    try:
        call_command("workflows", "doctor", *args, stdout=out)
    except SystemExit as exc:
        return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


def _kinds() -> dict[str, checks.Finding]:
    return {f.kind: f for f in checks.examine()}


def test_a_clean_database__exit_0_and_the_json_shape():
    _serve("wf", "grouped")
    assert _doctor() == (0, "doctor: nothing stuck found.\n")
    code, out = _doctor("--json")
    assert code == 0 and json.loads(out) == {"clean": True, "findings": []}


def test_runs_no_live_runner_serves__found_and_left_for_a_person():
    run_id = _start("wf", "a")
    _serve("grouped")
    code, out = _doctor("--json")
    [finding] = json.loads(out)["findings"]
    assert code == 1
    assert finding["kind"] == checks.UNSERVED and finding["run_ids"] == [run_id] and finding["count"] == 1
    assert set(finding) == {
        "kind",
        "title",
        "explanation",
        "run_ids",
        "count",
        "fixable",
        "capped",
        "subjects",
    }
    code, out = _doctor("--fix")
    assert code == 1 and "left for a person: start a runner" in out and run_id in out
    _serve("wf", owner="second")
    assert _doctor()[0] == 0


def test_a_dead_runners_lease__ended_by_fix_audited_then_claimable():
    _serve("wf", "grouped")
    run_id = _start("wf", "a")
    [claimed] = DjangoStore().claim(
        owner="dead-runner", workflows=["wf"], limit=1, lease_seconds=600, now=_now()
    )
    assert claimed.id == run_id
    assert list(_kinds()) == [checks.DEAD_LEASE]
    assert _kinds()[checks.DEAD_LEASE].run_ids == [run_id]
    code, out = _doctor("--fix")
    assert code == 0 and f"fix {checks.DEAD_LEASE}: repaired 1" in out
    run = Run.objects.get(id=run_id)
    assert run.wake_at <= _now()
    [audit] = AuditEntry.objects.filter(run_id=run_id)
    assert (
        audit.action == "doctor"
        and audit.actor.startswith("cli:")
        and audit.details["finding"] == checks.DEAD_LEASE
    )
    again = DjangoStore().claim(owner="live-runner", workflows=["wf"], limit=1, lease_seconds=30, now=_now())
    assert [r.id for r in again] == [run_id]


def test_a_lease_lapsed_long_ago__found_not_fixable():
    _serve("grouped")
    run_id = _start("wf", "a")
    DjangoStore().claim(owner="gone", workflows=["wf"], limit=1, lease_seconds=30, now=_now())
    Run.objects.filter(id=run_id).update(wake_at=_now() - dt.timedelta(hours=1))  # a runner crashed long ago
    found = _kinds()
    assert found[checks.LAPSED_LEASE].run_ids == [run_id] and not found[checks.LAPSED_LEASE].fixable


def test_runs_set_aside_in_a_group_nobody_frees__put_back_by_fix():
    _serve("wf", "grouped")
    first, second = _start("grouped", "g"), _start("grouped", "g")
    assert first == second  # the same key: one run; a second key of the same group:
    other = registry.client("grouped", store=DjangoStore()).get_or_create(["g", "2"]).run_id
    due = _now() - dt.timedelta(seconds=5)
    # As a claim sets them aside while a run of the group executes, whose end (a crash between
    # two writes, a deleted row) never put them back.
    Run.objects.filter(id__in=[first, other]).update(held_at=due, wake_at=None)
    found = _kinds()[checks.PARKED]
    assert sorted(found.run_ids) == sorted([first, other]) and found.subjects == ["grouped/g"]
    assert _doctor("--fix")[0] == 0
    assert set(Run.objects.filter(id__in=[first, other]).values_list("held_at", "wake_at")) == {(None, due)}
    assert AuditEntry.objects.filter(action="doctor", details__finding=checks.PARKED).count() == 2


def test_a_group_with_a_run_executing__not_a_finding():
    _serve("wf", "grouped")
    run_id = _start("grouped", "g")
    DjangoStore().claim(owner="live-runner", workflows=["grouped"], limit=1, lease_seconds=30, now=_now())
    held = registry.client("grouped", store=DjangoStore()).get_or_create(["g", "2"]).run_id
    Run.objects.filter(id=held).update(held_at=_now(), wake_at=None)
    assert Run.objects.get(id=run_id).status == RunStatus.RUNNING
    assert checks.PARKED not in _kinds()


def test_an_expired_limiter_slot__released_by_fix():
    _serve("wf", "grouped")
    long_ago = _now() - dt.timedelta(hours=1)
    slot = LimiterSlot.objects.create(
        limiter="api",
        holder="0190-x:/call#1",
        acquired_at=long_ago,
        expires_at=long_ago + dt.timedelta(seconds=30),
    )
    found = _kinds()[checks.LIMITER_SLOT]
    assert found.count == 1 and found.subjects == ["api: 0190-x:/call#1"] and found.run_ids == ["0190-x"]
    assert _doctor("--fix")[0] == 0
    slot.refresh_from_db()
    assert slot.released_at == slot.expires_at


def test_messages_to_a_finished_run__left_for_a_person():
    _serve("wf", "grouped")
    run_id = _start("wf", "a")
    DjangoStore().send(OutgoingMessage(queue="inbox", body={"n": 1}, run_id=run_id), now=_now())
    Run.objects.filter(id=run_id).update(status=RunStatus.COMPLETED, wake_at=None)  # it ended unread
    found = _kinds()[checks.FINISHED_MESSAGES]
    assert found.run_ids == [run_id] and not found.fixable
    code, out = _doctor("--fix")
    assert code == 1 and "messages_to_finished_runs: left for a person" in out


def test_a_schedule_past_its_next_fire__found():
    _serve("wf", "grouped")
    now = _now()
    Schedule.objects.create(
        name="nightly", workflow="wf", cron="0 3 * * *", next_fire_at=now - dt.timedelta(hours=2),
        created_at=now, updated_at=now,
    )  # fmt: skip
    Schedule.objects.create(
        name="paused", workflow="wf", cron="0 3 * * *", next_fire_at=now - dt.timedelta(hours=2),
        created_at=now, updated_at=now, paused=True,
    )  # fmt: skip
    found = _kinds()[checks.OVERDUE_SCHEDULE]
    assert found.count == 1 and found.subjects[0].startswith("nightly (due ")


def _parent_waiting_on_finished_child() -> tuple[str, str, str]:
    """A parent's `child` entry waits, its child has ended, and the report is missing (lost in
    a crash, or deleted): the parent would wait forever."""
    parent_id, child_id = _start("wf", "parent"), _start("wf", "child")
    queue = f"{CHILD_QUEUE_PREFIX}/kid"
    Run.objects.filter(id=parent_id).update(status=RunStatus.WAITING, wake_at=None)
    Entry.objects.create(
        run_id=parent_id, position=0, name="kid", kind=EntryKind.CHILD, status=EntryStatus.WAITING,
        input={"workflow": "wf", "key": ["child"], "input": None}, started_at=_now(),
    )  # fmt: skip
    Run.objects.filter(id=child_id).update(
        parent_id=parent_id, parent_queue=queue, status=RunStatus.COMPLETED, result={"v": 1}, wake_at=None
    )
    return parent_id, child_id, queue


def test_a_parent_waiting_on_a_finished_child__woken_by_fix_with_the_report():
    _serve("wf", "grouped")
    parent_id, child_id, queue = _parent_waiting_on_finished_child()
    assert _kinds()[checks.CHILD_REPORT].run_ids == [parent_id]
    assert _doctor("--fix")[0] == 0
    [report] = Message.objects.filter(run_id=parent_id, queue=queue)
    assert report.body == {"run_id": child_id, "status": "completed", "result": {"v": 1}}
    assert Run.objects.get(id=parent_id).wake_at is not None  # woken, as any message wakes it
    [audit] = AuditEntry.objects.filter(run_id=parent_id)
    assert audit.action == "send" and "doctor" in audit.reason


def test_a_parent_with_its_report_pending__not_a_finding():
    _serve("wf", "grouped")
    parent_id, child_id, queue = _parent_waiting_on_finished_child()
    Message.objects.create(run_id=parent_id, queue=queue, body={"run_id": child_id}, sent_at=_now())
    assert checks.CHILD_REPORT not in _kinds()


def test_runs_of_a_version_no_deployed_code_has__found():
    _serve("wf", "grouped")
    run_id = _start("wf", "a")
    Run.objects.filter(id=run_id).update(version="retired")
    found = _kinds()[checks.UNKNOWN_VERSION]
    assert found.run_ids == [run_id] and not found.fixable


def test_the_limit_and_the_count():
    ids = [_start("wf", str(i)) for i in range(5)]
    code, out = _doctor("--json", "--limit", "2")
    assert code == 1
    [finding] = json.loads(out)["findings"]
    assert finding["count"] == 5 and len(finding["run_ids"]) == 2 and set(finding["run_ids"]) <= set(ids)
    with pytest.raises(Exception, match="--limit must be between"):
        call_command("workflows", "doctor", "--limit", "0")


def test_the_dashboard_shows_the_count(client):
    user = User.objects.create_user("ann", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_run"))
    client.force_login(user)
    _serve("wf", "grouped")
    page = client.get(reverse("inspector:dashboard")).content.decode()
    assert "data-doctor-findings" not in page
    _start("wf", "a")
    Run.objects.filter(workflow="wf").update(
        version="retired", status=RunStatus.RUNNING, wake_at=_now() - dt.timedelta(hours=1)
    )
    cache.clear()  # the count is cached a minute
    page = client.get(reverse("inspector:dashboard")).content.decode()
    assert 'data-doctor-findings="1"' in page and "manage.py workflows doctor" in page


def test_the_runners_periodic_check_sets_the_gauge():
    _serve("grouped")
    _start("wf", "a")
    repairs.check_and_export()
    assert REGISTRY.get_sample_value("workflows_doctor_findings", {"kind": checks.UNSERVED}) == 1
    assert REGISTRY.get_sample_value("workflows_doctor_findings", {"kind": checks.PARKED}) == 0
    _serve("wf", owner="second")
    repairs.check_and_export()
    assert REGISTRY.get_sample_value("workflows_doctor_findings", {"kind": checks.UNSERVED}) == 0
