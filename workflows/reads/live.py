"""The live list of runs and the WebSocket consumers' reads: runs with their progress (current
step, attempts), what changed since a moment, one run's fingerprint and its events after a cursor.
The dashboard's list, the admin's changelist and the consumers read these; everything a run
recorded leaves here masked.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from typing import Any

from django.db.models import IntegerField, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from ..core.durations import format_duration
from ..masking import mask
from ..models import AuditEntry, Entry, Run, StreamChunk
from ..storage.django.rows import chunk_record
from .declarations import label_runs, run_labels
from .runs import events_after as recorded_events

RECENT_RUNS = 50


def parse_run_id(run_id: Any) -> str | None:
    """The run id as text, or None when `run_id` is not a UUID (no run has it)."""
    try:
        return str(uuid.UUID(str(run_id)))
    except (ValueError, TypeError, AttributeError):
        return None


def with_progress(runs: QuerySet[Run]) -> QuerySet[Run]:
    """Annotate `current_step` (the latest recorded entry) and `attempt_total` (attempts of the
    current entries) for the run list."""
    current = Entry.objects.filter(run=OuterRef("pk"), superseded=False).order_by("-id")
    attempts = (
        Entry.objects.filter(run=OuterRef("pk"), superseded=False)
        .order_by()
        .values("run")
        .annotate(total=Sum("attempts"))
        .values("total")
    )
    return runs.annotate(
        current_step=Subquery(current.values("name")[:1]),
        current_step_status=Subquery(current.values("status")[:1]),
        attempt_total=Coalesce(Subquery(attempts, output_field=IntegerField()), 0),
    )


def run_duration(run: Run, now: dt.datetime | None = None) -> float | None:
    """Seconds from start to finish, or to now while the run goes on."""
    begin = run.started_at or run.created_at
    if begin is None:
        return None
    end = run.finished_at or (now or timezone.now())
    return max((end - begin).total_seconds(), 0.0)


def run_summary(run: Run, now: dt.datetime | None = None) -> dict[str, Any]:
    """A run as the dashboard's live list shows it (JSON)."""
    return {
        "id": str(run.id),
        "workflow": run.workflow,
        "key": run.key,
        "version": run.version,
        "status": run.status,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "updated_at": run.updated_at.isoformat() if run.updated_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "duration": format_duration(run_duration(run, now)),
        "current_step": getattr(run, "current_step", None),
        "attempts": getattr(run, "attempt_total", None),
        "labels": run_labels(run).as_json(),
    }


# The list reads take `using`: the database alias read (the dashboard's may be a replica,
# workflows.reads.source); None is the default database.


def recent_runs(limit: int = RECENT_RUNS, using: str | None = None) -> list[Run]:
    """The newest runs, with their progress."""
    return _labelled(list(with_progress(Run.objects.using(using).order_by("-created_at"))[:limit]))


def runs_changed_since(since: dt.datetime, limit: int = 1000, using: str | None = None) -> list[Run]:
    """Runs created or changed at or after `since`, oldest change first. A step's commit moves
    only `updated_at` (not indexed), and only running runs commit steps: those are few, found by
    status; every other change moves the indexed `transitioned_at`."""
    changed = Q(transitioned_at__gte=since) | Q(status=Run.Status.RUNNING, updated_at__gte=since)
    return _labelled(
        list(with_progress(Run.objects.using(using).filter(changed).order_by("updated_at"))[:limit])
    )


def runs_by_id(ids: list[str], using: str | None = None) -> list[Run]:
    """These runs (malformed ids name none), with their progress."""
    ids = [i for i in (parse_run_id(x) for x in ids) if i]
    return _labelled(list(with_progress(Run.objects.using(using).filter(id__in=ids))))


def _labelled(runs: list[Run]) -> list[Run]:
    """The list with each run's labels attached (`label_runs`: live labels read once per list)."""
    label_runs(runs)
    return runs


def latest_change(using: str | None = None) -> dt.datetime:
    """When any run last changed: where a live list's next look for changes starts."""
    runs = Run.objects.using(using)
    moved = runs.aggregate(m=Max("transitioned_at"))["m"]
    stepped = runs.filter(status=Run.Status.RUNNING).aggregate(m=Max("updated_at"))["m"]
    return max((t for t in (moved, stepped) if t is not None), default=None) or timezone.now()


# --- the consumers' reads ---------------------------------------------------------------------


def run_exists(run_id: str) -> bool:
    """Whether a run has this id (a malformed one names none)."""
    found = parse_run_id(run_id)
    return found is not None and Run.objects.filter(id=found).exists()


def events_after(run_id: str, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """The run's events after a cursor, as the WebSocket sends them (the engine's one read),
    masked like everything else the inspector shows: a stream may reach more eyes than a page."""
    rows = recorded_events(run_id, after=after, limit=limit)
    return [{**e.as_json(), "data": mask(e.payload)} for e in rows]


def chunks_after(
    run_id: str, streams: list[str] | None, after: int, limit: int = 500
) -> list[dict[str, Any]]:
    """The run's stream chunks after a cursor (of `streams`, or of all when None), as the
    WebSocket sends them: `{"stream", "id", "step", "attempt", "seq", "data"}`, masked."""
    rows = StreamChunk.objects.filter(run_id=run_id, id__gt=after)
    if streams is not None:
        rows = rows.filter(stream__in=streams)
    return [{**c.as_json(), "data": mask(c.data)} for c in map(chunk_record, rows.order_by("id")[:limit])]


def run_fingerprint(run_id: str) -> dict[str, Any] | None:
    """What changes whenever anything on the run's page would: status, the last commit, the
    wake time, messages and audit entries (a message sent to a run does not touch the run row)."""
    row = (
        Run.objects.filter(id=run_id)
        .annotate(
            last_message=Max("messages__id"),
            last_audit=Subquery(
                AuditEntry.objects.filter(run=OuterRef("pk")).order_by("-id").values("id")[:1]
            ),
        )
        .values("status", "updated_at", "wake_at", "last_message", "last_audit")
        .first()
    )
    if row is None:
        return None
    return {
        "status": row["status"],
        "updated_at": row["updated_at"].isoformat() if row["updated_at"] else None,
        "wake_at": row["wake_at"].isoformat() if row["wake_at"] else None,
        "last_message": row["last_message"],
        "last_audit": row["last_audit"],
    }


def fingerprint_tag(fingerprint: dict[str, Any] | None) -> str:
    """A short tag of a run's fingerprint: a page rendered with it passes it to the run's socket
    (`seen=`), which then reports a change only when the run's fingerprint differs from it (else
    every page would fetch its body again as soon as its socket opened)."""
    if fingerprint is None:
        return ""
    return hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()[:16]
