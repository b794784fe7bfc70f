"""Pruning finished runs by WORKFLOWS["RETENTION"] on the real database (SQLite or PostgreSQL):
exactly the due runs go, with every row that refers to them, in batches; live runs, younger
runs and runs an operator acted on recently stay; `--dry-run` deletes nothing; the runner
prunes on its own; on PostgreSQL a run locked by someone else is skipped, not waited for, and
a second pruner steps aside."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import threading
import uuid

import pytest
from django.core.management import call_command
from django.db import connection, connections, transaction
from django.utils import timezone

from tests.support import wait_for
from workflows.core.retention import Retention
from workflows.engine.registry import setup
from workflows.engine.runner import Runner
from workflows.models import Attempt, AuditEntry, Entry, Event, Message, Run, StreamChunk
from workflows.storage.django import DjangoStore
from workflows.storage.django.prune import LOCK_KEY, prune, prune_in_own_thread

pytestmark = pytest.mark.django_db(transaction=True)

DAY = dt.timedelta(days=1)
POLICY = Retention(days={"completed": 30, "cancelled": 30, "failed": 90}, audited_days=365)
RETENTION_SETTING = {"completed": 30, "cancelled": 30, "failed": 90, "audited": 365}


def make_run(
    status: str, *, finished_days_ago: float | None = None, audited_days_ago: float | None = None
) -> Run:
    """A run with two entries, an attempt each, a consumed message, an event, two chunks of a
    stream and (optionally) an audit entry, created 1 day before it finished."""
    now = timezone.now()
    finished = None if finished_days_ago is None else now - finished_days_ago * DAY
    created = (finished or now) - DAY
    key = [uuid.uuid4().hex]
    run = Run.objects.create(
        workflow="wf",
        key=key,
        key_text=str(key),
        key_hash=uuid.uuid4().hex,
        status=status,
        created_at=created,
        updated_at=finished or now,
        finished_at=finished,
    )
    for position, name in enumerate(["wait", "step"]):
        entry = Entry.objects.create(
            run=run, position=position, name=name, kind="step", status="completed", output={"n": position}
        )
        Attempt.objects.create(entry=entry, number=1, started_at=created, finished_at=created, outcome="ok")
    Message.objects.create(
        run=run, queue="q", body={"hello": 1}, sent_at=created, consumed_at=created, consumed_by=entry
    )
    Event.objects.create(run=run, name="progress", payload={"stage": "x"}, created_at=created)
    for seq, text in enumerate(["Hel", "lo"]):
        StreamChunk.objects.create(
            run=run, stream="step", data=text, created_at=created, step="step", attempt=1, seq=seq
        )
    if audited_days_ago is not None:
        AuditEntry.objects.create(
            run=run, action="replay", actor="ops", reason="fix", created_at=now - audited_days_ago * DAY
        )
    return run


def children(run_ids) -> dict[str, int]:
    return {
        "entries": Entry.objects.filter(run_id__in=run_ids).count(),
        "attempts": Attempt.objects.filter(entry__run_id__in=run_ids).count(),
        "messages": Message.objects.filter(run_id__in=run_ids).count(),
        "events": Event.objects.filter(run_id__in=run_ids).count(),
        "chunks": StreamChunk.objects.filter(run_id__in=run_ids).count(),
        "audit": AuditEntry.objects.filter(run_id__in=run_ids).count(),
    }


@pytest.fixture
def runs() -> dict[str, Run]:
    """Due and kept runs of every kind, by name."""
    return {
        # due
        "completed-old": make_run("completed", finished_days_ago=31),
        "completed-older": make_run("completed", finished_days_ago=40),
        "completed-oldest": make_run("completed", finished_days_ago=50),
        "cancelled-old": make_run("cancelled", finished_days_ago=31),
        "failed-old": make_run("failed", finished_days_ago=91),
        "audited-long-ago": make_run("completed", finished_days_ago=500, audited_days_ago=400),
        # kept
        "completed-young": make_run("completed", finished_days_ago=29),
        "failed-young": make_run("failed", finished_days_ago=60),  # failed runs are kept longer
        "audited-recently": make_run("failed", finished_days_ago=200, audited_days_ago=100),
        "pending-old": make_run("pending"),
        "waiting-old": make_run("waiting"),
        "running-old": make_run("running"),
    }


DUE = {
    "completed-old",
    "completed-older",
    "completed-oldest",
    "cancelled-old",
    "failed-old",
    "audited-long-ago",
}


def _backdate_live(runs: dict[str, Run]) -> None:
    """Live runs created long ago (a run waiting a year on an approval): never due."""
    long_ago = timezone.now() - 1000 * DAY
    Run.objects.filter(status__in=["pending", "waiting", "running"]).update(created_at=long_ago)


def test_prune__deletes_exactly_the_due_runs_and_everything_of_theirs_in_batches(runs):
    _backdate_live(runs)
    due_ids = [runs[name].id for name in DUE]
    kept_ids = [run.id for name, run in runs.items() if name not in DUE]
    kept_before = children(kept_ids)
    assert children(due_ids)["audit"] == 1

    report = prune(POLICY, batch_size=2)

    assert set(Run.objects.values_list("id", flat=True)) == set(kept_ids)
    assert children(due_ids) == {
        "entries": 0,
        "attempts": 0,
        "messages": 0,
        "events": 0,
        "chunks": 0,
        "audit": 0,
    }
    assert children(kept_ids) == kept_before
    assert report.runs == {"completed": 4, "cancelled": 1, "failed": 1}
    # completed: 2 + 2, failed: 1, cancelled: 1 (a short batch ends a status)
    assert report.batches == 4
    assert report.rows == {
        "workflows_attempt": 12,
        "workflows_message": 6,
        "workflows_event": 6,
        "workflows_streamchunk": 12,
        "workflows_auditentry": 1,
        "workflows_entry": 12,
        "workflows_run": 6,
    }
    assert prune(POLICY).total_runs == 0  # nothing more is due


def test_prune__oldest_first_and_max_batches_stops(runs):
    report = prune(POLICY, batch_size=1, max_batches=2)
    assert report.batches == 2 and report.total_runs == 2
    gone = {name for name, run in runs.items() if not Run.objects.filter(id=run.id).exists()}
    assert gone == {"audited-long-ago", "completed-oldest"}  # the two created first


def test_prune__dry_run_counts_and_deletes_nothing(runs):
    def counts():
        return [model.objects.count() for model in (Run, Entry, Attempt, StreamChunk)]

    before = counts()
    report = prune(POLICY, dry_run=True)
    assert counts() == before
    assert report.runs == {"completed": 4, "cancelled": 1, "failed": 1}
    assert report.rows["workflows_entry"] == 12 and report.rows["workflows_auditentry"] == 1
    assert report.rows["workflows_streamchunk"] == 12
    assert report.lines()[0] == "would delete 6 run(s): 4 completed, 1 failed, 1 cancelled"


def test_prune__audited_runs_follow_their_own_retention():
    recent = make_run("completed", finished_days_ago=100, audited_days_ago=10)
    forever = Retention(days={"completed": 30}, audited_days=None)
    prune(forever)
    assert Run.objects.filter(id=recent.id).exists()
    ignore_audit = Retention(days={"completed": 30}, audited_days=0)
    prune(ignore_audit)
    assert not Run.objects.filter(id=recent.id).exists()


def test_prune__a_status_without_retention_is_kept(runs):
    report = prune(Retention(days={"failed": 90}))
    assert report.runs == {"failed": 1}
    assert Run.objects.filter(status="completed").count() == 5
    assert prune(Retention()).total_runs == 0 and not Retention().enabled


def test_command__dry_run_prints_what_it_would_delete_then_prune_deletes(runs, settings):
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": RETENTION_SETTING}
    out = io.StringIO()
    call_command("prune", "--dry-run", stdout=out)
    text = out.getvalue()
    assert "failed runs are kept 90 days" in text
    assert "would delete 6 run(s): 4 completed, 1 failed, 1 cancelled" in text
    assert "workflows_streamchunk 12" in text
    assert str(runs["failed-old"].id).replace("-", "") in text.replace("-", "")
    assert Run.objects.count() == 12

    out = io.StringIO()
    call_command("prune", "--batch", "5", stdout=out)
    assert "deleted 6 run(s)" in out.getvalue()
    assert Run.objects.count() == 6
    kept = set(Run.objects.values_list("id", flat=True))
    assert set(StreamChunk.objects.values_list("run_id", flat=True)) == kept  # the others' chunks stay
    assert StreamChunk.objects.count() == 12


def test_command__a_bad_policy_is_refused(settings):
    from django.core.management.base import CommandError

    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": {"completed": -1}}
    with pytest.raises(CommandError, match="completed"):
        call_command("prune", stdout=io.StringIO())


async def test_runner__prunes_on_its_own_every_interval(runs):
    """The runner's periodic hook, as `runworkflows` wires it: the prune runs in a thread of
    its own, while the runner claims and executes."""
    await asyncio.to_thread(_backdate_live, runs)

    async def body(ctx):
        return await ctx.step("one", lambda s: 1)

    registry = setup(use={"live": __import__("workflows").workflow(body)})
    runner = Runner(
        registry=registry,
        store=DjangoStore(),
        watch=False,
        periodic=[(0.05, lambda: prune_in_own_thread(POLICY, batch_size=2))],
    )
    task = asyncio.create_task(runner.run())
    try:
        due = [runs[name].id for name in DUE]
        await asyncio.to_thread(
            wait_for, lambda: not Run.objects.filter(id__in=due).exists(), 30, "the runner's prune"
        )
        assert await Run.objects.acount() == len(runs) - len(DUE)
    finally:
        runner.request_stop()
        await asyncio.wait_for(task, 30)


def test_runworkflows__wires_the_prune_only_when_retention_prunes(settings):
    from workflows.management.commands.runworkflows import _periodic

    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": {}, "DOCTOR_SECONDS": None, "BULK_SECONDS": None}
    assert _periodic() == []
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": {"failed": 90}, "PRUNE_SECONDS": None}
    assert _periodic() == []
    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": {"failed": 90}, "PRUNE_SECONDS": 120}
    [(seconds, _job)] = _periodic()
    assert seconds == 120


# --- PostgreSQL: never blocking, one pruner ---------------------------------------------------------


def _hold_in_other_session(sql: str, params: list, ready: threading.Event, release: threading.Event) -> None:
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(sql, params)
            ready.set()
            release.wait(30)
    finally:
        connections.close_all()


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's row and advisory locks")
def test_postgres__a_run_locked_by_another_session_is_skipped_not_waited_for(runs):
    locked = runs["completed-old"]
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_hold_in_other_session,
        args=("SELECT id FROM workflows_run WHERE id = %s FOR UPDATE", [locked.id], ready, release),
    )
    holder.start()
    try:
        assert ready.wait(10)
        with connection.cursor() as cursor:  # without SKIP LOCKED the prune would wait: fail instead
            cursor.execute("SET lock_timeout = '5s'")
        report = prune(POLICY, batch_size=2)
        assert report.total_runs == len(DUE) - 1
        assert Run.objects.filter(id=locked.id).exists()
    finally:
        release.set()
        holder.join(10)
    assert prune(POLICY).total_runs == 1  # its turn comes at the next prune


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PostgreSQL's advisory lock")
def test_postgres__a_second_pruner_steps_aside(runs):
    ready, release = threading.Event(), threading.Event()
    holder = threading.Thread(
        target=_hold_in_other_session, args=("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY], ready, release)
    )
    holder.start()
    try:
        assert ready.wait(10)
        report = prune(POLICY)
        assert report.skipped and report.total_runs == 0
        assert Run.objects.count() == len(runs)
    finally:
        release.set()
        holder.join(10)
    assert prune(POLICY).total_runs == len(DUE)
