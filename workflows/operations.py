"""Operators' repairs of a run: replay from a step, retry a step now, cancel, send a message.

Each is one transaction that also writes an AuditEntry (who, when, what, why). The admin, the
API and the commands call these and nothing else, so the three always agree.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection, transaction

from .core.exceptions import BadInput, RunNotFound
from .core.jsonvalue import normalize
from .core.records import TERMINAL, EntryStatus, OutgoingMessage, RunStatus
from .engine.definition import Registry
from .models import AuditEntry, Entry, Run


class RunBusy(BadInput):
    """The run is held by a runner right now; the operation needs it at rest."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _locked_run(run_id: str) -> Run:
    try:
        run = Run.objects.select_for_update().filter(id=run_id).first()
    except Exception:
        run = None
    if run is None:
        raise RunNotFound(f"no run with id {run_id!r}")
    return run


def _notify() -> None:
    if connection.vendor == "postgresql":
        from .storage.django.store import NOTIFY_CHANNEL

        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [NOTIFY_CHANNEL])


def _audit(run: Run, action: str, actor: str, reason: str, details: dict[str, Any], now: dt.datetime) -> None:
    AuditEntry.objects.create(
        run=run, action=action, actor=actor, reason=reason, details=details, created_at=now
    )


def replay_plan(run_id: str, entry_id: int) -> list[Entry]:
    """The entries a replay from `entry_id` would supersede, for a confirmation page."""
    entry = Entry.objects.filter(id=entry_id, run_id=run_id, superseded=False).first()
    if entry is None:
        raise BadInput(f"run {run_id} has no current entry {entry_id}")
    return list(
        Entry.objects.filter(
            run_id=run_id, scope=entry.scope, position__gte=entry.position, superseded=False
        ).order_by("position")
    )


def replay_from(
    run_id: str, entry_id: int, *, actor: str, reason: str = "", input: Any = None, edit_input: bool = False
) -> Run:
    """Run the run again from this entry: it and the entries after it in its scope become
    superseded history (kept, with their attempts); earlier entries, waits included, stay. With
    `edit_input`, the step reruns with `input` instead of its recorded one."""
    now = _now()
    with transaction.atomic():
        run = _locked_run(run_id)
        if run.status == RunStatus.RUNNING:
            raise RunBusy(f"run {run_id} is running; wait for it to finish or fail before replaying")
        doomed = replay_plan(run_id, entry_id)
        first = doomed[0]
        Entry.objects.filter(id__in=[e.id for e in doomed]).update(superseded=True)
        if edit_input:
            if first.kind != Entry.Kind.STEP:
                raise BadInput("only a step's input can be edited")
            Entry.objects.create(
                run=run,
                scope=first.scope,
                position=first.position,
                name=first.name,
                kind=first.kind,
                status=EntryStatus.RETRYING,
                input=normalize(input, "the edited input"),
                attempts=0,
                started_at=None,
                wake_at=now,
            )
        run.status, run.wake_at, run.lease_owner = RunStatus.PENDING, now, ""
        run.result = run.error = run.finished_at = None
        run.cancel_requested = False
        run.updated_at = now
        run.save()
        _audit(
            run,
            AuditEntry.Action.REPLAY,
            actor,
            reason,
            {"from_entry": first.id, "from_step": first.name, "superseded": [e.id for e in doomed],
             **({"input": input} if edit_input else {})},
            now,
        )  # fmt: skip
        _notify()
    return run


def retry_now(run_id: str, entry_id: int, *, actor: str, reason: str = "") -> Run:
    """Skip the rest of a step's retry backoff: its next attempt is due now."""
    now = _now()
    with transaction.atomic():
        run = _locked_run(run_id)
        entry = Entry.objects.filter(id=entry_id, run_id=run_id, superseded=False).first()
        if entry is None or entry.status != EntryStatus.RETRYING:
            raise BadInput(f"entry {entry_id} of run {run_id} is not waiting to retry")
        entry.wake_at = now
        entry.save(update_fields=["wake_at"])
        if run.status == RunStatus.WAITING:
            run.wake_at, run.updated_at = now, now
            run.save(update_fields=["wake_at", "updated_at"])
        _audit(run, AuditEntry.Action.RETRY_NOW, actor, reason, {"entry": entry.id, "step": entry.name}, now)
        _notify()
    return run


def cancel(run_id: str, *, actor: str, reason: str = "") -> Run:
    from .conf import default_store

    now = _now()
    with transaction.atomic():
        run = _locked_run(run_id)
        if run.status in TERMINAL:
            raise BadInput(f"run {run_id} is already {run.status}")
        default_store().request_cancel(run_id, now=now)
        _audit(run, AuditEntry.Action.CANCEL, actor, reason, {}, now)
    run.refresh_from_db()
    return run


def send(run_id: str, queue: str, body: Any, *, registry: Registry, actor: str, reason: str = "") -> int:
    """Send a message (e.g. an approval) to a run's queue, validated by its schema; returns its id."""
    from .conf import default_store

    now = _now()
    with transaction.atomic():
        run = _locked_run(run_id)
        definition = registry.get(run.workflow)
        spec = definition.queue_spec(queue, run.workflow)
        body = spec.validate(f"queue {run.workflow}.{queue}", body)
        message = default_store().send(OutgoingMessage(queue=queue, body=body, run_id=run_id), now=now)
        _audit(run, AuditEntry.Action.SEND, actor, reason, {"queue": queue, "message": message.id}, now)
    return message.id
