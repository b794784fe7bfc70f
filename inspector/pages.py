"""The inspector's shaping of the read model (`workflows.reads`) for its pages: one run's page
(its steps as views, the timeline, its model calls' tokens and cost, the decisions it waits on) and the
dashboard's backlog rows. The reads themselves, and what they mask, are in `workflows.reads`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from django.utils import timezone

from workflows import TERMINAL, RunStatus, conf, format_duration
from workflows.core.costs import CostSummary
from workflows.masking import mask
from workflows.models import Attempt, AuditEntry, Entry, Run
from workflows.reads import backlog as backlog_reads
from workflows.reads.costs import entries_cost
from workflows.reads.decisions import open_decisions
from workflows.reads.declarations import RunLabels, run_labels
from workflows.reads.live import run_duration
from workflows.reads.run import RunRecords, run_records
from workflows.reads.runs import Kept
from workflows.reads.steps import attempt_took, attempts_made, end_known, step_status

from .timeline import AttemptSpan, EntrySpan, Timeline, build_timeline


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
    status: str  # as shown: its record's, but `cancelled` where its cancelled run left it going on
    attempt_count: int  # the attempt in progress included
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
    cost: CostSummary  # every entry's recorded usage (superseded ones too), by model and by step
    queued: str  # from creation to the first claim
    attempt_total: int
    live: bool  # the run can still change by itself (not completed, failed or cancelled)
    decisions: dict[str, list[str]]  # decision queue -> its choices, for the queues it waits on now
    parent: Run | None = None  # a child run's parent (ctx.child) ...
    children: list[Run] = field(default_factory=list)  # ... and a parent's children, oldest first
    trace_id: str | None = None  # of the request that started the run (tracing on)
    trace_url: str | None = None  # WORKFLOWS["TRACE_URL"] with it
    kept: Kept | None = None  # a finished run: when pruning deletes it, and why
    forked_from: Run | None = None  # a fork's original ...
    forked_at: str = ""  # ... and the entry it ran fresh from
    forks: list[Run] = field(default_factory=list)  # the run's forks, oldest first


def run_page(run_id: str, now: dt.datetime | None = None) -> RunPage | None:
    """One run's page (the admin's run view), or None for an unknown run."""
    now = now or timezone.now()
    records = run_records(run_id)
    if records is None:
        return None
    run = records.run
    steps, history = _step_views(records.entries, run.status, now)
    return RunPage(
        run=run,
        labels=run_labels(run),
        state=mask(run.state),
        result=mask(run.result),
        error=mask(run.error),
        duration=format_duration(run_duration(run, now)),
        steps=steps,
        history=history,
        timeline=_timeline(run, records.entries, now),
        messages=records.messages,
        pending_messages=records.pending_messages,
        events=records.events,
        event_count=records.event_count,
        last_event_id=records.last_event_id,
        audit=records.audit,
        cost=entries_cost(records.entries),
        queued=format_duration((run.started_at - run.created_at).total_seconds()) if run.started_at else "—",
        attempt_total=sum(view.attempt_count for view in steps),
        live=run.status not in TERMINAL,
        decisions=open_decisions(run, records.entries),
        **_related(records),
    )


def _related(records: RunRecords) -> dict[str, Any]:
    return {
        "parent": records.parent,
        "children": records.children,
        "trace_id": records.trace_id,
        "trace_url": records.trace_url,
        "kept": records.kept,
        "forked_from": records.forked_from,
        "forked_at": records.forked_at,
        "forks": records.forks,
    }


def _step_views(
    entries: list[Entry], run_status: str, now: dt.datetime
) -> tuple[list[StepView], list[StepView]]:
    """The current entries' views, and the superseded ones' (each with its replacement)."""
    current = {(e.scope, e.position): e for e in entries if not e.superseded}
    steps, history = [], []
    for entry in entries:
        view = _step_view(entry, run_status, now)
        if entry.superseded:
            view.replaced_by = current.get((entry.scope, entry.position))
            history.append(view)
        else:
            steps.append(view)
    return steps, history


def _usage(meta: Any) -> dict[str, Any] | None:
    usage = (meta or {}).get("usage") if isinstance(meta, dict) else None
    return usage if isinstance(usage, dict) and usage else None


def _step_view(entry: Entry, run_status: str, now: dt.datetime) -> StepView:
    attempts = entry.attempt_history()
    if entry.started_at is not None:
        end = entry.finished_at or (now if not entry.superseded else None)
        duration = format_duration((end - entry.started_at).total_seconds()) if end else "—"
    else:
        duration = "—"
    for a in attempts:
        a.masked_error = mask(a.error)
        a.took = attempt_took(a.outcome, a.started_at, a.finished_at)
        a.end_known = end_known(a.outcome, a.started_at, a.finished_at)
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
        status=step_status(entry.status, run_status, superseded=entry.superseded),
        attempt_count=attempts_made(entry.status, entry.attempts),
    )


def _timeline(run: Run, entries: list[Entry], now: dt.datetime) -> Timeline:
    spans = [
        EntrySpan(
            id=e.id,
            name=e.name if not e.scope else f"{e.scope}/{e.name}",
            kind=e.kind,
            status=step_status(e.status, run.status, superseded=e.superseded),
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
    return build_timeline(
        spans,
        start=run.started_at or run.created_at,  # from the first claim: queueing shows in the facts
        end=run.finished_at,
        now=now,
        running=run.status == RunStatus.RUNNING,
        running_since=run.started_at,
    )


# --- the dashboard's backlog --------------------------------------------------------------------


@dataclass
class BacklogRow:
    workflow: str
    due: int
    oldest_due: str  # how late the oldest due, unclaimed run is now
    late: bool  # the oldest due run waits longer than BACKLOG_LATE
    stalled: int
    started_recently: int
    median_lateness: str  # of the runs first started in the last 15 minutes


BACKLOG_LATE = dt.timedelta(seconds=60)  # the oldest due run waiting longer is shown as late


def backlog(now: dt.datetime | None = None, using: str | None = None) -> list[BacklogRow]:
    """Per workflow the server serves (and any other with runs behind): due and unclaimed runs,
    the oldest one's lateness, stalled runs, and the median schedule-to-start of runs started in
    the last 15 minutes (`started_at - created_at` from run rows)."""
    rows = backlog_reads.backlog(now, workflows=conf.registry().names(), using=using)
    return [
        BacklogRow(
            workflow=row.workflow,
            due=row.due,
            oldest_due=format_duration(row.oldest_due_seconds),
            late=(row.oldest_due_seconds or 0) > BACKLOG_LATE.total_seconds(),
            stalled=row.stalled,
            started_recently=row.started_recently,
            median_lateness=format_duration(row.median_start_lateness),
        )
        for row in rows
    ]
