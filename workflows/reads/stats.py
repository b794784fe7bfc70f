"""The last hour's figures the operator dashboard shows: status counts, throughput, failure rate,
failed attempts, step durations (how far behind the runners are: `backlog`; runs awaiting a
decision: `decisions`; the runs list: `live`).

Failures are counted where they happened, not only where they ended: a run that failed and was
then repaired (an operator replayed it; its failed step stays as superseded history) counts as a
failure of the hour it failed in, even though its status now says completed, and every failed
attempt counts, retried or not. A dashboard that forgot a failure once it was repaired would hide
exactly the trouble an operator needs to see.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from ..core.durations import format_duration
from ..core.records import EntryStatus, RunStatus
from ..models import Attempt, Entry, Run, implied_attempts

STATS_WINDOW = dt.timedelta(hours=1)
STATS_ROW_CAP = 20_000  # rows read for the percentiles of one window
BUCKETS = 12  # the hour's chart: one bar per 5 minutes


# --- the last hour's figures ------------------------------------------------------------------


@dataclass
class StepStat:
    workflow: str
    name: str
    count: int
    p50: str
    p95: str
    retried: int


@dataclass
class DashboardStats:
    counts: dict[str, int]
    total: int
    started_last_hour: int
    finished_last_hour: int
    completed_last_hour: int
    failed_last_hour: int  # runs that failed in the last hour, repaired since or not
    repaired_last_hour: int  # of those, the ones no longer failed (replayed)
    cancelled_last_hour: int
    failure_rate: float | None  # failed / (completed + failed), last hour
    attempts_last_hour: int  # step attempts that ended in the last hour
    failed_attempts_last_hour: int  # of those, the ones that did not succeed (error, timeout, lost...)
    throughput_per_minute: float
    buckets: list[dict[str, Any]]  # per 5 minutes of the last hour: completed, failed
    step_stats: list[StepStat]


def percentile(sorted_values: list[float], p: float) -> float:
    """Nearest-rank percentile of already sorted values (p in 0..100)."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, min(len(sorted_values), -(-len(sorted_values) * p // 100)))
    return sorted_values[int(rank) - 1]


def dashboard_stats(now: dt.datetime | None = None, using: str | None = None) -> DashboardStats:
    """`using`: the database alias read (a replica, workflows.reads.source; None: the default)."""
    now = now or timezone.now()
    since = now - STATS_WINDOW
    runs, entries = Run.objects.using(using), Entry.objects.using(using)
    counts: dict[str, int] = {status: 0 for status in RunStatus}
    for row in runs.order_by().values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]
    finished: list[tuple[Any, str, Any]] = list(  # (id, status, finished_at)
        runs.filter(finished_at__gte=since, finished_at__lte=now)
        .order_by()
        .values_list("id", "status", "finished_at")[:STATS_ROW_CAP]
    )
    failed_now = {run_id for run_id, status, _ in finished if status == RunStatus.FAILED}
    repaired = _repaired(entries, since, now, failed_now)
    by_status: dict[str, int] = defaultdict(int)
    for _, status, _finished_at in finished:
        by_status[status] += 1
    # A repaired run that completed since counts once: as a failure.
    completed = sum(
        1 for run_id, status, _ in finished if status == RunStatus.COMPLETED and run_id not in repaired
    )
    failed = len(failed_now) + len(repaired)
    attempts_total, attempts_failed = _attempt_counts(entries, since, now, using)
    return DashboardStats(
        counts=counts,
        total=sum(counts.values()),
        started_last_hour=runs.filter(created_at__gte=since).count(),
        finished_last_hour=len(finished),
        completed_last_hour=completed,
        failed_last_hour=failed,
        repaired_last_hour=len(repaired),
        cancelled_last_hour=by_status[RunStatus.CANCELLED],
        failure_rate=(failed / (completed + failed)) if completed + failed else None,
        attempts_last_hour=attempts_total,
        failed_attempts_last_hour=attempts_failed,
        throughput_per_minute=len(finished) / (STATS_WINDOW.total_seconds() / 60),
        buckets=_buckets(since, finished, repaired),
        step_stats=_step_stats(entries, since, now),
    )


def _bucket(since: dt.datetime, when: dt.datetime) -> int:
    """Which of the hour's BUCKETS `when` falls in (out of range: outside the window)."""
    return int((when - since).total_seconds() // (STATS_WINDOW.total_seconds() / BUCKETS))


def _repaired(
    entries: QuerySet[Entry], since: dt.datetime, now: dt.datetime, failed_now: set[Any]
) -> dict[Any, dt.datetime]:
    """Runs whose step failed for good in the window and were replayed since (the failed record is
    kept, superseded), with when they failed. Those that failed again are already counted by their
    status."""
    repaired: dict[Any, dt.datetime] = {}
    for run_id, failed_at in (
        entries.filter(
            superseded=True, status=EntryStatus.FAILED, finished_at__gte=since, finished_at__lte=now
        )
        .order_by()
        .values_list("run_id", "finished_at")[:STATS_ROW_CAP]
    ):
        if failed_at is None:  # filtered out above; here for the type checker
            continue
        if run_id not in failed_now:
            repaired[run_id] = min(failed_at, repaired.get(run_id, failed_at))
    return repaired


def _buckets(
    since: dt.datetime, finished: list[tuple[Any, str, Any]], repaired: dict[Any, dt.datetime]
) -> list[dict[str, Any]]:
    """Per 5 minutes of the hour: runs completed, failed (repaired ones where they failed) and
    cancelled, with the bars' heights and labels."""
    buckets: list[dict[str, Any]] = [{"completed": 0, "failed": 0, "cancelled": 0} for _ in range(BUCKETS)]
    for _, status, finished_at in finished:
        index = _bucket(since, finished_at)
        if 0 <= index < BUCKETS and status in buckets[index]:
            buckets[index][status] += 1
    for failed_at in repaired.values():
        index = _bucket(since, failed_at)
        if 0 <= index < BUCKETS:
            buckets[index]["failed"] += 1
    peak = max([b["completed"] + b["failed"] + b["cancelled"] for b in buckets] + [1])
    for i, b in enumerate(buckets):
        b["height"] = round((b["completed"] + b["failed"] + b["cancelled"]) / peak * 100, 1)
        b["failed_height"] = round(b["failed"] / peak * 100, 1)
        b["label"] = (since + i * STATS_WINDOW / BUCKETS).strftime("%H:%M")
    return buckets


def _attempt_counts(
    entries: QuerySet[Entry], since: dt.datetime, now: dt.datetime, using: str | None
) -> tuple[int, int]:
    """Step attempts that ended in the window, and how many of them did not succeed."""
    counts = (
        Attempt.objects.using(using)
        .filter(finished_at__gte=since, finished_at__lte=now)
        .aggregate(total=Count("id"), failed=Count("id", filter=~Q(outcome="ok")))
    )
    # Steps that succeeded at their first attempt store no attempt row (`Entry.attempt_history`).
    implied = entries.filter(implied_attempts(), finished_at__gte=since, finished_at__lte=now).count()
    return counts["total"] + implied, counts["failed"]


def _step_stats(entries: QuerySet[Entry], since: dt.datetime, now: dt.datetime) -> list[StepStat]:
    """Per (workflow, step) completed in the window: how many, p50 and p95 durations, how many retried."""
    durations: dict[tuple[str, str], list[float]] = defaultdict(list)
    retried: dict[tuple[str, str], int] = defaultdict(int)
    rows = (
        entries.filter(
            kind=Entry.Kind.STEP,
            status=Entry.Status.COMPLETED,
            superseded=False,
            finished_at__gte=since,
            finished_at__lte=now,
            started_at__isnull=False,
        )
        .order_by()
        .values_list("run__workflow", "name", "started_at", "finished_at", "attempts")[:STATS_ROW_CAP]
    )
    for workflow, name, started, ended, attempts in rows:
        if started is None or ended is None:  # filtered out above; here for the type checker
            continue
        durations[(workflow, name)].append((ended - started).total_seconds())
        if attempts > 1:
            retried[(workflow, name)] += 1
    found = []
    for (workflow, name), values in sorted(durations.items()):
        values.sort()
        found.append(
            StepStat(
                workflow=workflow,
                name=name,
                count=len(values),
                p50=format_duration(percentile(values, 50)),
                p95=format_duration(percentile(values, 95)),
                retried=retried[(workflow, name)],
            )
        )
    return found
