"""The inspector's reads of runs: the run list, the consumers' checks and one run's page, with the
select/prefetch and annotations each takes (the dashboard's figures and decisions are in
`dashboard_selectors`). Everything a run recorded leaves here masked.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from django.db.models import IntegerField, Max, OuterRef, Q, QuerySet, Subquery, Sum
from django.db.models.functions import Coalesce
from django.utils import timezone

from workflows import conf
from workflows import selectors as workflow_reads
from workflows.core.durations import format_duration
from workflows.core.records import TERMINAL, EntryStatus, RunStatus
from workflows.masking import mask
from workflows.models import Attempt, AuditEntry, Entry, Event, Message, Run, attempts_in_order
from workflows.telemetry.tracing import trace_id

from .declarations import RunLabels, decision_queues, definition, run_labels
from .timeline import AttemptSpan, EntrySpan, Timeline, build_timeline

EVENTS_ON_PAGE = 200  # the run page shows the latest events; the WebSocket has them all
MESSAGES_ON_PAGE = 200
RECENT_RUNS = 50


def parse_run_id(run_id: Any) -> str | None:
    import uuid

    try:
        return str(uuid.UUID(str(run_id)))
    except (ValueError, TypeError, AttributeError):
        return None


# --- the run list -----------------------------------------------------------------------------


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
# workflows.read_source); None is the default database.


def recent_runs(limit: int = RECENT_RUNS, using: str | None = None) -> list[Run]:
    return list(with_progress(Run.objects.using(using).order_by("-created_at"))[:limit])


def runs_changed_since(since: dt.datetime, limit: int = 1000, using: str | None = None) -> list[Run]:
    """Runs created or changed at or after `since`, oldest change first. A step's commit moves
    only `updated_at` (not indexed), and only running runs commit steps: those are few, found by
    status; every other change moves the indexed `transitioned_at`."""
    changed = Q(transitioned_at__gte=since) | Q(status=Run.Status.RUNNING, updated_at__gte=since)
    return list(with_progress(Run.objects.using(using).filter(changed).order_by("updated_at"))[:limit])


def runs_by_id(ids: list[str], using: str | None = None) -> list[Run]:
    ids = [i for i in (parse_run_id(x) for x in ids) if i]
    return list(with_progress(Run.objects.using(using).filter(id__in=ids)))


def latest_change(using: str | None = None) -> dt.datetime:
    runs = Run.objects.using(using)
    moved = runs.aggregate(m=Max("transitioned_at"))["m"]
    stepped = runs.filter(status=Run.Status.RUNNING).aggregate(m=Max("updated_at"))["m"]
    return max((t for t in (moved, stepped) if t is not None), default=None) or timezone.now()


# --- the consumers' reads ---------------------------------------------------------------------


def run_exists(run_id: str) -> bool:
    run_id = parse_run_id(run_id)
    return run_id is not None and Run.objects.filter(id=run_id).exists()


def events_after(run_id: str, after: int, limit: int = 500) -> list[dict[str, Any]]:
    """The run's events after a cursor, as the WebSocket sends them (the engine's one read),
    masked like everything else the inspector shows: a stream may reach more eyes than a page."""
    rows = workflow_reads.events_after(run_id, after=after, limit=limit)
    return [{**e.as_json(), "data": mask(e.payload)} for e in rows]


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


# --- one run's page ---------------------------------------------------------------------------


@dataclass
class StepView:
    entry: Entry
    attempts: list[Attempt]
    input: Any
    output: Any
    error: Any
    meta: Any
    usage: dict[str, Any] | None
    duration: str
    replaced_by: Entry | None = None  # for a superseded record: the entry that took its place
    attempt_errors: dict[int, Any] = field(default_factory=dict)


@dataclass
class RunPage:
    run: Run
    labels: RunLabels  # what the workflow declares names the run
    state: Any
    result: Any
    error: Any
    duration: str
    steps: list[StepView]  # current entries, in order
    history: list[StepView]  # superseded entries (replayed), in order
    timeline: Timeline
    messages: list[dict[str, Any]]
    pending_messages: int
    events: list[dict[str, Any]]
    event_count: int
    last_event_id: int
    audit: list[AuditEntry]
    usage_total: dict[str, int]
    queued: str  # from creation to the first claim
    attempt_total: int
    live: bool  # the run can still change by itself (not completed, failed or cancelled)
    decisions: dict[str, list[str]]  # decision queue -> its choices, for the queues it waits on now
    parent: Run | None = None  # a child run's parent (ctx.child) ...
    children: list[Run] = field(default_factory=list)  # ... and a parent's children, oldest first
    trace_id: str | None = None  # of the request that started the run (tracing on)
    trace_url: str | None = None  # WORKFLOWS["TRACE_URL"] with it
    kept: workflow_reads.Kept | None = None  # a finished run: when pruning deletes it, and why


CHILDREN_SHOWN = 50  # a run page lists at most this many children


def _entry_order(entry: Entry) -> tuple:
    return (entry.scope, entry.position, not entry.superseded, entry.id)


def _usage(meta: Any) -> dict[str, Any] | None:
    usage = (meta or {}).get("usage") if isinstance(meta, dict) else None
    return usage if isinstance(usage, dict) and usage else None


def _step_view(entry: Entry, now: dt.datetime) -> StepView:
    attempts = entry.attempt_history()
    if entry.started_at is not None:
        end = entry.finished_at or (now if not entry.superseded else None)
        duration = format_duration((end - entry.started_at).total_seconds()) if end else "—"
    else:
        duration = "—"
    for a in attempts:
        a.masked_error = mask(a.error)
        a.took = format_duration((a.finished_at - a.started_at).total_seconds())
        a.delay_text = format_duration(a.delay) if a.delay is not None else ""
    return StepView(
        entry=entry,
        attempts=attempts,
        input=mask(entry.input),
        output=mask(entry.output),
        error=mask(entry.error),
        meta=mask(entry.meta),
        usage=_usage(entry.meta),
        duration=duration,
    )


def run_page(run_id: str, now: dt.datetime | None = None) -> RunPage | None:
    now = now or timezone.now()
    run_id = parse_run_id(run_id)
    run = Run.objects.filter(id=run_id).first() if run_id else None
    if run is None:
        return None
    entries = sorted(
        Entry.objects.filter(run=run).prefetch_related(attempts_in_order()),
        key=_entry_order,
    )
    current = {(e.scope, e.position): e for e in entries if not e.superseded}
    steps, history = [], []
    for entry in entries:
        view = _step_view(entry, now)
        if entry.superseded:
            view.replaced_by = current.get((entry.scope, entry.position))
            history.append(view)
        else:
            steps.append(view)

    spans = [
        EntrySpan(
            id=e.id,
            name=e.name if not e.scope else f"{e.scope}/{e.name}",
            kind=e.kind,
            status=e.status,
            started_at=e.started_at,
            finished_at=e.finished_at,
            wake_at=e.wake_at,
            superseded=e.superseded,
            attempts=[
                AttemptSpan(
                    number=a.number,
                    started_at=a.started_at,
                    finished_at=a.finished_at,
                    outcome=a.outcome,
                    delay=a.delay,
                    retry_at=a.retry_at,
                )
                for a in e.attempt_history()
            ],
        )
        for e in entries
    ]
    timeline = build_timeline(
        spans,
        start=run.started_at or run.created_at,  # from the first claim: queueing shows in the facts
        end=run.finished_at,
        now=now,
        running=run.status == RunStatus.RUNNING,
        running_since=run.started_at,
    )

    messages = []
    consumed_by = dict(Entry.objects.filter(run=run).values_list("id", "name"))
    for m in Message.objects.filter(run=run).order_by("-id")[:MESSAGES_ON_PAGE]:
        messages.append(
            {
                "id": m.id,
                "queue": m.queue,
                "body": mask(m.body),
                "sent_at": m.sent_at,
                "consumed_at": m.consumed_at,
                "consumed_by": consumed_by.get(m.consumed_by_id),
                "response": mask(m.response),
                "completed_at": m.completed_at,
            }
        )
    messages.reverse()
    pending = Message.objects.filter(run=run, consumed_at__isnull=True).count()

    event_rows = list(Event.objects.filter(run=run).order_by("-id")[:EVENTS_ON_PAGE])
    event_rows.reverse()
    events = [
        {
            "id": e.id,
            "name": e.name,
            "payload": mask(e.payload),
            "created_at": e.created_at,
            "step": e.step,
            "attempt": e.attempt,
            "lost": e.lost,
        }
        for e in event_rows
    ]
    event_count = Event.objects.filter(run=run).count()

    audit = list(AuditEntry.objects.filter(run=run).order_by("-created_at", "-id"))
    for a in audit:
        a.masked_details = mask(a.details)

    usage_total: dict[str, int] = defaultdict(int)
    for view in steps:
        for k, v in (view.usage or {}).items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                usage_total[k] += v

    return RunPage(
        run=run,
        labels=run_labels(run),
        state=mask(run.state),
        result=mask(run.result),
        error=mask(run.error),
        duration=format_duration(run_duration(run, now)),
        steps=steps,
        history=history,
        timeline=timeline,
        messages=messages,
        pending_messages=pending,
        events=events,
        event_count=event_count,
        last_event_id=event_rows[-1].id if event_rows else 0,
        audit=audit,
        usage_total=dict(usage_total),
        queued=format_duration((run.started_at - run.created_at).total_seconds()) if run.started_at else "—",
        attempt_total=sum(view.entry.attempts for view in steps),
        parent=Run.objects.filter(id=run.parent_id).first() if run.parent_id else None,
        children=list(Run.objects.filter(parent_id=run.id).order_by("created_at")[:CHILDREN_SHOWN]),
        **_trace(run),
        kept=workflow_reads.run_kept(run, max((a.created_at for a in audit), default=None)),
        live=run.status not in TERMINAL,
        decisions=open_decisions(run, entries),
    )


def _trace(run: Run) -> dict[str, str | None]:
    """The run's trace id, from the context stored when it was started, and its link."""
    tid = trace_id(run.trace_context)
    template = conf.get("TRACE_URL")
    url = template.replace("{trace_id}", tid) if tid and isinstance(template, str) else None
    return {"trace_id": tid, "trace_url": url}


def open_decisions(run: Run, entries: list[Entry]) -> dict[str, list[str]]:
    """The decision queues (`queue(..., choices=...)`) the run's open queue waits listen to."""
    if run.status in TERMINAL:
        return {}
    declared = decision_queues(definition(run.workflow, run.version))
    found: dict[str, list[str]] = {}
    for e in entries:
        if e.kind == Entry.Kind.QUEUE and e.status == EntryStatus.WAITING and not e.superseded:
            listens = (e.input or {}).get("queues") or list(declared)  # none named: every queue
            found.update({q: declared[q] for q in listens if q in declared})
    return found


def current_entry(run_id: str, entry_id: int) -> Entry | None:
    return Entry.objects.filter(run_id=run_id, id=entry_id, superseded=False).first()
