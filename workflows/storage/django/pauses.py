"""Operators' pauses as store methods: pause and resume a run, pause and resume a workflow.

A paused run holds no lease and has no wake time (`wake_at` NULL), so no claim sees it: its due
time waits in `paused_due_at` and comes back on resume, so a timer or retry that fell due while it
was paused fires at once. A running run cannot be stopped from here (its runner holds it): it is
asked (`pause_requested`), its runner's next commit sees the request (`statements.shared.HOLD`),
and the run stops at its next entry, its step's result recorded; the commit that hands it back
makes it paused (`statements.shared.run_update`). A paused workflow is a `WorkflowPause` row:
claims skip its runs, whatever their status. Each change is one transaction with its audit.
"""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Count

from ...core import repair_rules
from ...core.exceptions import NotApplicable
from ...core.pauses import WorkflowPauseRecord
from ...core.records import TERMINAL, Audit, AuditAction, RunRecord, RunStatus
from ...models import AuditEntry, Run, WorkflowPause
from .notify import notify_now
from .repairs import RESUMED_FIELDS, audit_entry, locked_run, resume_unpaused, write_audit
from .rows import run_record


def _record(row: WorkflowPause, paused_runs: int = 0) -> WorkflowPauseRecord:
    return WorkflowPauseRecord(
        workflow=row.workflow, reason=row.reason, actor=row.actor, paused_at=row.paused_at,
        paused_runs=paused_runs,
    )  # fmt: skip


class DjangoPauses:
    def pause(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        """An idle run is paused at once; a running one is asked, and stops at its next entry."""
        with transaction.atomic():
            run = locked_run(run_id)
            repair_rules.check(repair_rules.PAUSE, run_id, run.status)
            if run.status == RunStatus.RUNNING:
                if run.pause_requested:
                    raise NotApplicable(
                        "Pause does not apply: this run is already asked to pause, at its next entry.",
                        action=repair_rules.PAUSE, run_id=run_id, status=run.status,
                    )  # fmt: skip
                run.pause_requested = True
                run.save(update_fields=["pause_requested", *run.touch(now)])
                details = {"from_status": RunStatus.RUNNING, "at_next_entry": True}
            else:
                details = {"from_status": run.status, "due_at": _iso(run.wake_at or run.held_at)}
                run.paused_due_at = run.wake_at or run.held_at  # a run set aside in its group, too
                run.status, run.wake_at, run.held_at = RunStatus.PAUSED, None, None
                run.save(update_fields=["status", "paused_due_at", "wake_at", "held_at", *run.touch(now)])
            write_audit(run_id, AuditAction.PAUSE, audit, details, now)
        return run_record(run)

    def resume(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        """A paused run is due again at its kept due time (now if that passed, or if it only waited
        for a message: one that came meanwhile is then read); a running run asked to pause is
        no longer asked."""
        with transaction.atomic():
            run = locked_run(run_id)
            if run.status == RunStatus.RUNNING and run.pause_requested:
                run.pause_requested = False
                run.save(update_fields=["pause_requested", *run.touch(now)])
                write_audit(run_id, AuditAction.RESUME, audit, {"withdrawn": True}, now)
                return run_record(run)
            repair_rules.check(repair_rules.RESUME, run_id, run.status)
            due = run.paused_due_at if run.paused_due_at is not None and run.paused_due_at > now else now
            resume_unpaused(run, due)
            run.save(update_fields=[*RESUMED_FIELDS, *run.touch(now)])
            write_audit(run_id, AuditAction.RESUME, audit, {"due_at": _iso(due)}, now)
            notify_now()
        return run_record(run)

    def pause_workflow(self, workflow: str, *, audit: Audit, now: dt.datetime) -> WorkflowPauseRecord:
        """No run of `workflow` is claimed until it is resumed; runs running now stop at their next
        entry (handed back pending). Written on each unfinished run's audit log."""
        with transaction.atomic():
            row, created = WorkflowPause.objects.select_for_update().get_or_create(
                workflow=workflow, defaults={"reason": audit.reason, "actor": audit.actor, "paused_at": now}
            )
            if not created:
                raise NotApplicable(f"The workflow {workflow!r} is already paused (by {row.actor}).")
            _audit_unfinished(workflow, AuditAction.PAUSE_WORKFLOW, audit, now)
        return _record(row)

    def resume_workflow(self, workflow: str, *, audit: Audit, now: dt.datetime) -> WorkflowPauseRecord:
        """Its runs are claimed again (those paused one by one stay paused)."""
        with transaction.atomic():
            row = WorkflowPause.objects.select_for_update().filter(workflow=workflow).first()
            if row is None:
                raise NotApplicable(f"The workflow {workflow!r} is not paused.")
            record = _record(row)  # before the delete, which clears the row's key (its name)
            row.delete()
            _audit_unfinished(workflow, AuditAction.RESUME_WORKFLOW, audit, now)
            notify_now()
        return record

    def paused_workflows(self) -> list[WorkflowPauseRecord]:
        """The paused workflows, by name, each with its count of runs paused one by one."""
        rows = list(WorkflowPause.objects.order_by("workflow"))
        counts = dict(
            Run.objects.filter(status=RunStatus.PAUSED, workflow__in=[r.workflow for r in rows])
            .values("workflow")
            .annotate(n=Count("id"))
            .values_list("workflow", "n")
        )
        return [_record(r, counts.get(r.workflow, 0)) for r in rows]


def _audit_unfinished(workflow: str, action: str, audit: Audit, now: dt.datetime) -> None:
    ids = (
        Run.objects.filter(workflow=workflow).exclude(status__in=list(TERMINAL)).values_list("id", flat=True)
    )
    AuditEntry.objects.bulk_create(
        [audit_entry(str(i), action, audit, {"workflow": workflow}, now) for i in ids], batch_size=1000
    )


def _iso(when: dt.datetime | None) -> str | None:
    return when.isoformat() if when is not None else None
