"""One run's records, as its page shows them: the run, its entries (current and superseded) with
their attempts, the latest messages and events, the audit log, its parent and children, and how
long it is kept. Everything a run recorded leaves here masked, but the entries (which the page
masks field by field as it lays them out).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import conf
from ..masking import mask
from ..models import AuditEntry, Entry, Event, Message, Run, attempts_in_order
from ..telemetry.tracing import trace_id
from .live import parse_run_id
from .runs import Kept, run_kept

EVENTS_ON_PAGE = 200  # the run page shows the latest events; the WebSocket has them all
MESSAGES_ON_PAGE = 200
CHILDREN_SHOWN = 50  # a run page lists at most this many children


@dataclass
class RunRecords:
    run: Run
    entries: list[Entry]  # by scope and position, a superseded record before its replacement
    messages: list[dict[str, Any]]  # the latest MESSAGES_ON_PAGE, oldest first
    pending_messages: int
    events: list[dict[str, Any]]  # the latest EVENTS_ON_PAGE, oldest first
    event_count: int
    last_event_id: int
    audit: list[AuditEntry]  # newest first, each with `masked_details`
    parent: Run | None = None  # a child run's parent (ctx.child) ...
    children: list[Run] = field(default_factory=list)  # ... and a parent's children, oldest first
    trace_id: str | None = None  # of the request that started the run (tracing on)
    trace_url: str | None = None  # WORKFLOWS["TRACE_URL"] with it
    kept: Kept | None = None  # a finished run: when pruning deletes it, and why
    forked_from: Run | None = None  # a fork's original (`operations.fork_run`) ...
    forked_at: str = ""  # ... and the name of the entry it ran fresh from
    forks: list[Run] = field(default_factory=list)  # a run's forks, oldest first


def run_records(run_id: str) -> RunRecords | None:
    """The run's records for its page; None for an unknown (or malformed) id."""
    found = parse_run_id(run_id)
    run = Run.objects.filter(id=found).first() if found else None
    if run is None:
        return None
    events = _events(run)
    audit = list(AuditEntry.objects.filter(run=run).order_by("-created_at", "-id"))
    for a in audit:
        a.masked_details = mask(a.details)  # type: ignore[attr-defined]  # for the page's template
    return RunRecords(
        run=run,
        entries=sorted(Entry.objects.filter(run=run).prefetch_related(attempts_in_order()), key=_entry_order),
        messages=_messages(run),
        pending_messages=Message.objects.filter(run=run, consumed_at__isnull=True).count(),
        events=events,
        event_count=Event.objects.filter(run=run).count(),
        last_event_id=events[-1]["id"] if events else 0,
        audit=audit,
        parent=Run.objects.filter(id=run.parent_id).first() if run.parent_id else None,
        children=list(Run.objects.filter(parent_id=run.id).order_by("created_at")[:CHILDREN_SHOWN]),
        **_trace(run),
        kept=run_kept(run, max((a.created_at for a in audit), default=None)),
        forked_from=Run.objects.filter(id=run.forked_from_id).first() if run.forked_from_id else None,
        forked_at=_entry_name(run.forked_from_entry),
        forks=list(Run.objects.filter(forked_from_id=run.id).order_by("created_at")[:CHILDREN_SHOWN]),
    )


def _entry_name(entry_id: int | None) -> str:
    """A fork's starting entry by name ("" when it is not a fork, or the entry was pruned)."""
    if entry_id is None:
        return ""
    return Entry.objects.filter(id=entry_id).values_list("name", flat=True).first() or ""


def current_entry(run_id: str, entry_id: int) -> Entry | None:
    """The run's entry of this id, unless an operator's replay superseded it."""
    return Entry.objects.filter(run_id=run_id, id=entry_id, superseded=False).first()


def _entry_order(entry: Entry) -> tuple[str, int, bool, int]:
    return (entry.scope, entry.position, not entry.superseded, entry.id)


def _messages(run: Run) -> list[dict[str, Any]]:
    consumed_by: dict[int | None, str] = dict(Entry.objects.filter(run=run).values_list("id", "name"))
    found = [
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
        for m in Message.objects.filter(run=run).order_by("-id")[:MESSAGES_ON_PAGE]
    ]
    found.reverse()
    return found


def _events(run: Run) -> list[dict[str, Any]]:
    rows = list(Event.objects.filter(run=run).order_by("-id")[:EVENTS_ON_PAGE])
    rows.reverse()
    return [
        {
            "id": e.id,
            "name": e.name,
            "payload": mask(e.payload),
            "created_at": e.created_at,
            "step": e.step,
            "attempt": e.attempt,
            "lost": e.lost,
        }
        for e in rows
    ]


def _trace(run: Run) -> dict[str, str | None]:
    """The run's trace id, from the context stored when it was started, and its link."""
    tid = trace_id(run.trace_context)
    template = conf.get("TRACE_URL")
    url = template.replace("{trace_id}", tid) if tid and isinstance(template, str) else None
    return {"trace_id": tid, "trace_url": url}


__all__ = [
    "CHILDREN_SHOWN",
    "EVENTS_ON_PAGE",
    "MESSAGES_ON_PAGE",
    "RunRecords",
    "current_entry",
    "run_records",
]
