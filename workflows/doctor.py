"""The doctor's repairs (`manage.py workflows doctor --fix`) and the runner's periodic check.

Only what is safe is repaired, each with the engine's own mechanism: a dead runner's lease ends
(as a same-host takeover ends it), runs set aside in a group nobody frees go back in line (as a
starting runner puts them back), expired limiter slots are marked released, and a parent
waiting on a finished child gets the child's report (as the child's last commit sends it). Every
change to a run writes its AuditEntry in the same transaction (`doctor`, or `send` for a report).
Each repair re-checks its condition under the lock, so a run that moved meanwhile is left alone.
What needs a person (unserved workflows, unknown versions, messages to finished runs, overdue
schedules) is reported, never touched.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from django.db import connections, transaction
from django.db.models import F

from . import conf
from .core.records import LIVE, TERMINAL, Audit, AuditAction, EntryKind, EntryStatus
from .engine.children import child_queue, report_to_parent
from .models import Entry, LimiterSlot, Message, Run
from .reads import doctor as checks
from .storage.django import notify
from .storage.django.reconnect import reconnecting
from .storage.django.repairs import write_audit
from .telemetry import metrics

FIX_BATCH = 1000  # runs (or slots) one --fix repairs per finding; run it again for more


@dataclass(frozen=True)
class Repair:
    kind: str
    repaired: int
    note: str


def _audit(run_ids: list[str], finding: str, repair: str, *, actor: str, now: dt.datetime) -> None:
    audit = Audit(actor=actor, reason=f"workflows doctor --fix: {repair}")
    for run_id in run_ids:
        write_audit(run_id, AuditAction.DOCTOR, audit, {"finding": finding, "repair": repair}, now)


def end_dead_leases(s: checks.Situation, *, actor: str) -> int:
    """The run becomes claimable now (its wake time, the lease's expiry, moves to now)."""
    with transaction.atomic():
        ids = list(
            checks.dead_lease_runs(s)
            .select_for_update()
            .order_by("id")
            .values_list("id", flat=True)[:FIX_BATCH]
        )
        Run.objects.filter(id__in=ids).update(wake_at=s.now, updated_at=s.now, transitioned_at=s.now)
        _audit(
            [str(i) for i in ids],
            checks.DEAD_LEASE,
            "ended the lease of a dead runner",
            actor=actor,
            now=s.now,
        )
    if ids:
        notify.notify_now()
    return len(ids)


def put_back_parked(s: checks.Situation, *, actor: str) -> int:
    """Every run set aside in a stuck group is due again at its due time (`held_at`), as a
    starting runner's `unpark_held` does; the next claim sets aside again what the group's max
    does not admit."""
    with transaction.atomic():
        groups = checks.stuck_groups(s)
        ids = list(
            checks.parked_runs_of(groups)
            .select_for_update()
            .order_by("id")
            .values_list("id", flat=True)[:FIX_BATCH]
        )
        Run.objects.filter(id__in=ids, held_at__isnull=False, wake_at__isnull=True).update(
            wake_at=F("held_at"), held_at=None, updated_at=s.now, transitioned_at=s.now
        )
        _audit(
            [str(i) for i in ids], checks.PARKED, "put back in line a run set aside", actor=actor, now=s.now
        )
    if ids:
        notify.notify_now()
    return len(ids)


def release_expired_slots(s: checks.Situation, *, actor: str) -> int:
    ids = list(checks.expired_slots(s).order_by("id").values_list("id", flat=True)[:FIX_BATCH])
    return LimiterSlot.objects.filter(id__in=ids, released_at__isnull=True).update(
        released_at=F("expires_at")
    )


def deliver_child_reports(s: checks.Situation, *, actor: str) -> int:
    """Each finished child's report, sent to its parent's queue as its last commit sends it
    (`report_to_parent`), audited as a `send` on the parent; re-checked under the parent's lock."""
    store = conf.default_store()
    delivered = 0
    for child_id in checks.waiting_children(s).order_by("id").values_list("id", flat=True)[:FIX_BATCH]:
        with transaction.atomic():
            child = store.get_run(str(child_id))
            if child.parent_id is None:
                continue
            parent = Run.objects.select_for_update().filter(id=child.parent_id, status__in=LIVE).first()
            if parent is None or not _still_waiting(child.parent_id, child.parent_queue, child.status):
                continue
            for message in report_to_parent(child, child.status, child.result, child.error):
                reason = f"workflows doctor --fix: delivered the report of finished child run {child.id}"
                store.send(message, now=s.now, audit=Audit(actor=actor, reason=reason))
                delivered += 1
    return delivered


def _still_waiting(parent_id: str | None, queue: str | None, child_status: str) -> bool:
    if child_status not in TERMINAL or not parent_id or not queue:
        return False
    if Message.objects.filter(run_id=parent_id, queue=queue, consumed_at__isnull=True).exists():
        return False  # the report is there: the parent will read it
    waits = Entry.objects.filter(
        run_id=parent_id, kind=EntryKind.CHILD, status=EntryStatus.WAITING, superseded=False
    )
    return any(child_queue(e.scope, e.name) == queue for e in waits)


FIXES: dict[str, Callable[..., int]] = {
    checks.DEAD_LEASE: end_dead_leases,
    checks.PARKED: put_back_parked,
    checks.LIMITER_SLOT: release_expired_slots,
    checks.CHILD_REPORT: deliver_child_reports,
}
LEFT = {
    checks.UNSERVED: "start a runner whose registries include the workflow",
    checks.LAPSED_LEASE: "start a runner that serves the workflow; the runs are claimable",
    checks.FINISHED_MESSAGES: "replay the run if the messages matter; otherwise they are pruned with it",
    checks.OVERDUE_SCHEDULE: "start a runner that declares the schedule, or pause it (`workflows schedule pause`)",
    checks.UNKNOWN_VERSION: "deploy code registering that version, or replay or cancel the runs",
}


def fix(findings: list[checks.Finding], s: checks.Situation, *, actor: str) -> list[Repair]:
    """Repair the fixable findings; say, for the others, what is left for a person."""
    done = []
    for finding in findings:
        repair = FIXES.get(finding.kind)
        if repair is None:
            done.append(Repair(finding.kind, 0, f"left for a person: {LEFT.get(finding.kind, 'see above')}"))
            continue
        n = repair(s, actor=actor)
        done.append(Repair(finding.kind, n, f"repaired {n}"))
    return done


def check_and_export() -> list[checks.Finding]:
    """The cheap checks, their counts set on the `workflows_doctor_findings` gauge."""
    findings = checks.examine(cheap=True)
    counts = {f.kind: f.count for f in findings}
    metrics.doctor_findings({kind: counts.get(kind, 0) for kind in checks.CHEAP_KINDS})
    return findings


async def check_in_own_thread() -> list[checks.Finding]:
    """For the runner's periodic check (WORKFLOWS["DOCTOR_SECONDS"]): in a worker thread with its
    own connection, closed after, never in the runner's database threads."""

    @reconnecting  # the database out of reach: StoreUnavailable, logged in one line
    def work() -> list[checks.Finding]:
        try:
            return check_and_export()
        finally:
            connections.close_all()  # this thread's connections only

    return await asyncio.to_thread(work)
