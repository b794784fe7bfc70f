"""How far behind the runners are, read from run rows: what is due and not claimed, how late the
oldest due run is, and how late recent runs started. `/metrics` and the dashboard both read it.

Every query is bounded by an index: live runs by `workflows_run_status`, due runs by
`workflows_run_wake`, recently started runs by `workflows_run_transitioned` (a claim moves
`transitioned_at`, so a run started in the window was transitioned in it).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Count, Min

from .. import conf
from ..core.records import LIVE, RunStatus
from ..models import Run

RECENT_WINDOW = dt.timedelta(minutes=15)
RECENT_ROW_CAP = 20_000  # run rows read for the medians of one window


@dataclass(frozen=True)
class Backlog:
    """One workflow's figures; lateness in seconds (None: nothing to measure)."""

    workflow: str
    due: int  # pending or waiting runs whose wake_at has passed: no runner has claimed them
    oldest_due_seconds: float | None  # how late the oldest of them is now
    stalled: int  # running runs whose lease lapsed: their runner died; claimable again
    started_recently: int  # runs first started in the last RECENT_WINDOW ...
    median_start_lateness: float | None  # ... and the median of started_at - created_at


def live_counts() -> dict[tuple[str, str], int]:
    """Live runs (pending, running, waiting) by (workflow, status): one GROUP BY over the status
    index. Finished runs are left out on purpose: their number only grows (the
    `workflows_runs_finished_total` counter tells their rate) and counting them reads history."""
    rows = (
        Run.objects.filter(status__in=list(LIVE))
        .order_by()
        .values_list("workflow", "status")
        .annotate(n=Count("id"))
    )
    return {(workflow, status): n for workflow, status, n in rows}


def backlog(
    now: dt.datetime | None = None,
    workflows: list[str] | None = None,
    *,
    lateness: bool = True,
    using: str | None = None,
) -> list[Backlog]:
    """Per workflow (those named, plus any with something to show), sorted by name. Without
    `lateness` the recent runs' start lateness is not read (`/metrics` has it as a histogram).
    `using`: the database alias read (the dashboard's may be a replica, workflows.reads.source)."""
    now = now or conf.default_store().shared_clock.now()  # due and stalled as the runners judge them
    due_rows = (
        Run.objects.using(using)
        .filter(wake_at__lte=now, status__in=[RunStatus.PENDING, RunStatus.WAITING])
        .order_by()
        .values_list("workflow")
        .annotate(n=Count("id"), oldest=Min("wake_at"))
    )
    due = {workflow: (n, oldest) for workflow, n, oldest in due_rows}
    stalled_rows = (
        Run.objects.using(using)
        .filter(wake_at__lte=now, status=RunStatus.RUNNING)
        .order_by()
        .values_list("workflow")
        .annotate(n=Count("id"))
    )
    stalled = dict(stalled_rows)
    late = _start_lateness(now, using) if lateness else {}
    names = sorted(set(workflows or []) | set(due) | set(stalled) | set(late))
    found = []
    for name in names:
        count, oldest = due.get(name, (0, None))
        values = sorted(late.get(name, []))
        found.append(
            Backlog(
                workflow=name,
                due=count,
                oldest_due_seconds=max(0.0, (now - oldest).total_seconds()) if oldest else None,
                stalled=stalled.get(name, 0),
                started_recently=len(values),
                median_start_lateness=_median(values),
            )
        )
    return found


def _start_lateness(now: dt.datetime, using: str | None = None) -> dict[str, list[float]]:
    """started_at - created_at of the runs first started in the last RECENT_WINDOW, by workflow."""
    since = now - RECENT_WINDOW
    started = (
        Run.objects.using(using)
        .filter(transitioned_at__gte=since, started_at__gte=since, started_at__lte=now)
        .order_by()
        .values_list("workflow", "created_at", "started_at")[:RECENT_ROW_CAP]
    )
    found: dict[str, list[float]] = {}
    for workflow, created_at, started_at in started:
        if started_at is None:  # filtered out above; here for the type checker
            continue
        found.setdefault(workflow, []).append(max(0.0, (started_at - created_at).total_seconds()))
    return found


def _median(sorted_values: list[float]) -> float | None:
    if not sorted_values:
        return None
    middle = len(sorted_values) // 2
    if len(sorted_values) % 2:
        return sorted_values[middle]
    return (sorted_values[middle - 1] + sorted_values[middle]) / 2
