"""Operators' repairs of a run as store methods: replay from an entry, retry a step now, cancel.
Each is one transaction that also writes its AuditEntry (who, when, what, why) and wakes the
runners, so the admin, the API and the commands (through `workflows.operations`) always agree,
and the engine's test suite covers them on SQLite and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Case, Value, When

from ...core import repair_rules
from ...core.exceptions import BadInput, RunNotFound
from ...core.jsonvalue import normalize
from ...core.keys import quoted
from ...core.records import (
    CHILD_QUEUE_PREFIX,
    NOT_EDITED,
    Audit,
    AuditAction,
    AuditRecord,
    EntryKind,
    EntryRecord,
    EntryStatus,
    RunRecord,
    RunStatus,
)
from ...models import AuditEntry, Entry, Message, Run
from .notify import notify_now
from .rows import ENTRY_FIELDS, audit_record, run_record


def audit_entry(
    run_id: str, action: str, audit: Audit, details: dict[str, Any], now: dt.datetime
) -> AuditEntry:
    """An unsaved entry (a bulk operation writes a batch's at once); a repair that is part of a
    bulk operation names it in its details."""
    if audit.bulk_operation is not None:
        details = {**details, "bulk_operation": audit.bulk_operation}
    return AuditEntry(
        run_id=run_id, action=action, actor=audit.actor, reason=audit.reason, details=details, created_at=now
    )


def write_audit(run_id: str, action: str, audit: Audit, details: dict[str, Any], now: dt.datetime) -> None:
    audit_entry(run_id, action, audit, details, now).save()


def locked_run(run_id: str) -> Run:
    try:
        run = Run.objects.select_for_update().filter(id=run_id).first()
    except (ValidationError, ValueError, TypeError):  # not a UUID
        run = None
    if run is None:
        raise RunNotFound(f"no run with id {quoted(run_id)}")
    return run


RESUMED_FIELDS = ["status", "wake_at", "paused_due_at", "pause_requested"]


def resume_unpaused(run: Run, due: dt.datetime) -> None:
    """Put a paused run back in line, due at `due` (unsaved; RESUMED_FIELDS): pending if it never
    ran, else waiting."""
    run.status = RunStatus.PENDING if run.started_at is None else RunStatus.WAITING
    run.wake_at, run.paused_due_at, run.pause_requested = due, None, False


def _consumed_by(run_id: str, entry_ids: list[int]) -> list[dict[str, Any]]:
    """The messages these entries consumed, in their original order (oldest first). A child's
    report on its parent's internal queue is not among them: a replayed `child` entry reads a
    finished child's outcome from the child run itself."""
    rows = (
        Message.objects.filter(run_id=run_id, consumed_by_id__in=entry_ids)
        .exclude(queue__startswith=CHILD_QUEUE_PREFIX)
        .order_by("id")
    )
    return [{"id": m["id"], "queue": m["queue"]} for m in rows.values("id", "queue")]


def _put_back(run_id: str, entry_ids: list[int]) -> dict[str, Any]:
    """Re-deliver what the superseded entries consumed: the same rows made unconsumed, not copies.
    Each keeps its id, so the queue hands them out again in their original order, ahead of any
    message sent since, and a row can be consumed once more only once (no copy is left behind to
    deliver twice); a completed message keeps the response its sender already read."""
    messages = _consumed_by(run_id, entry_ids)
    if messages:
        ids = [m["id"] for m in messages]
        Message.objects.filter(run_id=run_id, id__in=ids).update(consumed_at=None, consumed_by=None)
    return {"redelivered": messages}


def _left_consumed(run_id: str, entry_ids: list[int]) -> dict[str, Any]:
    """The operator chose to wait for new messages: the consumed ones stay with the history."""
    return {"redelivered": [], "not_redelivered": _consumed_by(run_id, entry_ids)}


class DjangoRepairs:
    def replay(
        self,
        run_id: str,
        entry_id: int,
        *,
        audit: Audit,
        now: dt.datetime,
        input: Any = NOT_EDITED,
        redeliver: bool = True,
    ) -> RunRecord:
        edited = input is not NOT_EDITED
        if edited:  # refused before the transaction starts
            input = normalize(input, "the edited input")
        with transaction.atomic():
            run = locked_run(run_id)
            repair_rules.check(repair_rules.REPLAY, run_id, run.status)
            first = Entry.objects.filter(id=entry_id, run_id=run_id, superseded=False).first()
            if first is None:
                raise BadInput(f"run {run_id} has no current entry {entry_id}")
            if edited and first.kind != EntryKind.STEP:
                raise BadInput("only a step's input can be edited")
            doomed = list(
                Entry.objects.filter(
                    run_id=run_id, scope=first.scope, position__gte=first.position, superseded=False
                )
                .order_by("position")
                .values_list("id", flat=True)
            )
            Entry.objects.filter(id__in=doomed).update(superseded=True)
            details: dict[str, Any] = {"from_entry": first.id, "from_step": first.name, "superseded": doomed}
            details.update(_put_back(run_id, doomed) if redeliver else _left_consumed(run_id, doomed))
            if edited:
                Entry.objects.create(
                    run=run, scope=first.scope, position=first.position, name=first.name, kind=first.kind,
                    status=EntryStatus.RETRYING, input=input, attempts=0,
                    started_at=None, wake_at=now,
                )  # fmt: skip
                details["input"] = input
            run.status, run.wake_at, run.lease_owner = RunStatus.PENDING, now, ""
            run.result = run.error = run.finished_at = None
            run.cancel_requested = run.pause_requested = False
            run.paused_due_at = None  # a replay of a paused run resumes it
            run.epoch += 1  # the steps that run again get new idempotency keys
            run.touch(now)
            run.save()
            write_audit(run_id, AuditAction.REPLAY, audit, details, now)
            notify_now()
        return run_record(run)

    def retry_now(self, run_id: str, entry_id: int, *, audit: Audit, now: dt.datetime) -> RunRecord:
        with transaction.atomic():
            run = locked_run(run_id)
            repair_rules.check(repair_rules.RETRY_NOW, run_id, run.status)
            entry = Entry.objects.filter(id=entry_id, run_id=run_id, superseded=False).first()
            if entry is None:
                raise BadInput(f"run {run_id} has no current entry {entry_id}")
            repair_rules.check(
                repair_rules.RETRY_NOW, run_id, run.status, step=entry.name, step_status=entry.status
            )
            entry.wake_at = now
            entry.save(update_fields=["wake_at"])
            if run.status == RunStatus.WAITING:
                run.wake_at = now
                run.save(update_fields=["wake_at", *run.touch(now)])
            elif run.status == RunStatus.PAUSED:  # held after its retries ran out: resumed for one more
                resume_unpaused(run, now)
                run.save(update_fields=[*RESUMED_FIELDS, *run.touch(now)])
            write_audit(run_id, AuditAction.RETRY_NOW, audit, {"entry": entry.id, "step": entry.name}, now)
            notify_now()
        return run_record(run)

    def cancel(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        with transaction.atomic():
            run = locked_run(run_id)
            repair_rules.check(repair_rules.CANCEL, run_id, run.status)
            record = self.request_cancel(run_id, now=now)  # type: ignore[attr-defined]
            write_audit(run_id, AuditAction.CANCEL, audit, {}, now)
        return record

    def cancel_batch(self, run_ids: list[str], *, audit: Audit, now: dt.datetime) -> dict[str, str]:
        """`cancel` of many runs in one transaction, set-based (one UPDATE per kind of run and one
        INSERT of their audit entries) with the same effect on each run as `cancel`: a run not yet
        asked is asked, a running one finishes at its next entry, any other is woken to finish
        as cancelled, and each gets its audit entry. Returns the runs it did not apply to, each
        with the sentence that says why (a finished run, a vanished one); those are untouched."""
        with transaction.atomic():
            rows = list(
                Run.objects.select_for_update()
                .filter(id__in=run_ids)
                .order_by("id")  # locked in one order: two batches never deadlock
                .values_list("id", "status", "cancel_requested")
            )
            refused = {str(i): "The run no longer exists (pruned?)." for i in run_ids}
            asked: list[Any] = []
            running: list[Any] = []
            idle: list[Any] = []
            for run_id, status, requested in rows:
                refusal = repair_rules.why_not(repair_rules.CANCEL, status)
                if refusal is not None:
                    refused[str(run_id)] = refusal
                    continue
                del refused[str(run_id)]
                asked.append(run_id)
                if not requested:  # as `request_cancel`: asking twice changes nothing
                    (running if status == RunStatus.RUNNING else idle).append(run_id)
            moved = {"cancel_requested": True, "updated_at": now, "transitioned_at": now}
            Run.objects.filter(id__in=running).update(**moved)
            Run.objects.filter(id__in=idle).update(**moved, wake_at=now)  # woken to finish as cancelled
            Run.objects.filter(id__in=idle, status=RunStatus.PAUSED).update(  # as `resume_unpaused`
                paused_due_at=None, pause_requested=False,
                status=Case(When(started_at__isnull=True, then=Value(RunStatus.PENDING.value)),
                            default=Value(RunStatus.WAITING.value)),
            )  # fmt: skip
            AuditEntry.objects.bulk_create(
                [audit_entry(str(i), AuditAction.CANCEL, audit, {}, now) for i in asked]
            )
            if running or idle:
                notify_now()
        return refused

    def audit_log(self, run_id: str) -> list[AuditRecord]:
        return [
            audit_record(a) for a in AuditEntry.objects.filter(run_id=run_id).order_by("-created_at", "-id")
        ]

    def superseded(self, run_id: str) -> list[EntryRecord]:
        rows = Entry.objects.filter(run_id=run_id, superseded=True).order_by("id")
        return [EntryRecord(**row) for row in rows.values(*ENTRY_FIELDS)]
