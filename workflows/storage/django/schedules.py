"""Schedules and start options in the Django store: the schedule table's rows (synced from code,
fired by runners, paused by operators) and `start_run` (the client's `on_conflict="replace"` and
`debounce=`). Each write is one transaction; a fire is fenced by the row's next fire time, so of
several runners checking the same schedule one starts its runs and the others write nothing.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

from django.db import IntegrityError, transaction

from ...core.exceptions import BadInput
from ...core.keys import key_identity
from ...core.new_run import NewRun
from ...core.records import TERMINAL, RunRecord, RunStatus
from ...core.schedules import LAST_RUNS, REPLACED_EVENT, RunStart, ScheduleDeclaration, ScheduleRecord
from ...models import Event, Run, Schedule
from . import starts, values
from .notify import notify_now
from .rows import run_record

CONFLICT_RETRIES = 3  # a concurrent creator of the same key or schedule: read again and go on


def replaced_key_hash(key_text: str, run_id: Any) -> str:
    """The key hash a replaced run keeps: unique to that run (the key finds its successor), and
    never the hash of a real key (a key's text holds no NUL)."""
    return hashlib.sha256(f"{key_text}\0replaced:{run_id}".encode()).hexdigest()


def schedule_record(row: Schedule) -> ScheduleRecord:
    return ScheduleRecord(
        name=row.name, workflow=row.workflow, cron=row.cron, timezone=row.timezone, catch_up=row.catch_up,
        next_fire_at=row.next_fire_at, last_fire_at=row.last_fire_at, paused=row.paused, gone=row.gone,
        paused_at=row.paused_at, paused_by=row.paused_by, pause_reason=row.pause_reason,
        last_runs=list(row.last_runs or []), created_at=row.created_at, updated_at=row.updated_at,
    )  # fmt: skip


class DjangoSchedules:
    """Mixed into DjangoStore (which provides `get_or_create_run`)."""

    # --- start options ----------------------------------------------------------------------------

    def start_run(
        self, new: NewRun, *, replace: bool = False, debounce: float | None = None
    ) -> tuple[RunRecord, bool]:
        for attempt in range(CONFLICT_RETRIES):
            try:
                return _start_run(new, replace, debounce)
            except IntegrityError:  # another start created the key meanwhile: go again
                if attempt == CONFLICT_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    # --- schedules --------------------------------------------------------------------------------

    def sync_schedules(
        self, *, declared: list[ScheduleDeclaration], served: list[str], now: dt.datetime
    ) -> None:
        for attempt in range(CONFLICT_RETRIES):
            try:
                return _sync(declared, served, now)
            except IntegrityError:  # another runner inserted the same schedule meanwhile
                if attempt == CONFLICT_RETRIES - 1:
                    raise

    def list_schedules(self) -> list[ScheduleRecord]:
        return [schedule_record(row) for row in Schedule.objects.order_by("name")]

    def fire_schedule(
        self,
        name: str,
        *,
        expected_next: dt.datetime,
        starts: list[RunStart],
        next_fire_at: dt.datetime,
        now: dt.datetime,
    ) -> list[RunRecord] | None:
        with transaction.atomic():
            row = (
                Schedule.objects.select_for_update(skip_locked=values.pg())  # a runner firing it: skip
                .filter(name=name, next_fire_at=expected_next, paused=False, gone=False)
                .first()
            )
            if row is None:
                return None
            runs = [
                self.get_or_create_run(NewRun.of_fire(s, now))[0]  # type: ignore[attr-defined]
                for s in starts
            ]
            fired = [
                {"fire_time": s.fire_time.isoformat(), "run_id": r.id}
                for s, r in zip(starts, runs, strict=True)
            ]
            row.next_fire_at = next_fire_at
            if starts:
                row.last_fire_at = starts[-1].fire_time
            row.last_runs = (fired[::-1] + list(row.last_runs or []))[:LAST_RUNS]
            row.updated_at = now
            row.save(update_fields=["next_fire_at", "last_fire_at", "last_runs", "updated_at"])
        return runs

    def pause_schedule(
        self,
        name: str,
        *,
        paused: bool,
        actor: str,
        reason: str,
        next_fire_at: dt.datetime | None,
        now: dt.datetime,
    ) -> ScheduleRecord:
        with transaction.atomic():
            row = Schedule.objects.select_for_update().filter(name=name).first()
            if row is None:
                raise BadInput(f"no schedule named {name!r}")
            row.paused, row.updated_at = paused, now
            if paused:
                row.paused_at, row.paused_by, row.pause_reason = now, actor, reason
            else:
                row.paused_at, row.paused_by, row.pause_reason = None, "", ""
                row.next_fire_at = next_fire_at
            row.save()
            notify_now()  # runners re-read their schedules' next fire at their next check
        return schedule_record(row)


def _start_run(new: NewRun, replace: bool, debounce: float | None) -> tuple[RunRecord, bool]:
    now = new.now
    key_text, key_hash = key_identity(new.key)
    wake = now + dt.timedelta(seconds=debounce or 0)
    with transaction.atomic():
        old = Run.objects.select_for_update().filter(workflow=new.workflow, key_hash=key_hash).first()
        if old is not None and debounce is not None and _not_started(old):
            old.wake_at, old.state = wake, new.initial_state  # pushed back, with the latest input
            old.save(update_fields=["wake_at", "state", *old.touch(now)])
            return run_record(old), False
        if old is not None and not replace:
            return run_record(old), False
        if old is not None:  # replaced: off the key, asked to stop, pointing at its successor
            old.key_hash = replaced_key_hash(key_text, old.id)
            fields = ["key_hash", *old.touch(now)]
            if old.status not in TERMINAL and not old.cancel_requested:
                old.cancel_requested = True
                fields.append("cancel_requested")
                if old.status != RunStatus.RUNNING:  # a waiting run is woken to end as cancelled
                    old.wake_at = now
                    fields.append("wake_at")
            old.save(update_fields=fields)
        made = starts.create_run(new.but(first_message=None, parent_id=None, parent_queue=None))
        if new.first_message is not None:
            starts.insert_first_message(str(made.id), new.first_message, now)
        if wake != now:
            made.wake_at = wake
            made.save(update_fields=["wake_at"])
        if old is not None:
            Event.objects.create(run=old, name=REPLACED_EVENT, payload={"by": str(made.id)}, created_at=now)
        notify_now()
    return run_record(made), True


def _not_started(run: Run) -> bool:
    """No runner has claimed it yet (claims set `started_at`): a debounced start may push it."""
    return run.status == RunStatus.PENDING and run.started_at is None and not run.cancel_requested


def _sync(declared: list[ScheduleDeclaration], served: list[str], now: dt.datetime) -> None:
    with transaction.atomic():
        rows = {row.name: row for row in Schedule.objects.select_for_update()}
        for d in declared:
            row = rows.get(d.name)
            if row is None:
                Schedule.objects.create(
                    name=d.name, workflow=d.workflow, cron=d.cron, timezone=d.timezone, catch_up=d.catch_up,
                    next_fire_at=d.first_fire_at, created_at=now, updated_at=now,
                )  # fmt: skip
                continue
            if (row.cron, row.timezone) != (d.cron, d.timezone) or row.gone or row.next_fire_at is None:
                row.next_fire_at = d.first_fire_at  # re-timed or back in code: from now on
            row.workflow, row.cron, row.timezone, row.catch_up = d.workflow, d.cron, d.timezone, d.catch_up
            row.gone, row.updated_at = False, now
            row.save()
        names = [d.name for d in declared]
        Schedule.objects.filter(workflow__in=served, gone=False).exclude(name__in=names).update(
            gone=True, updated_at=now
        )
