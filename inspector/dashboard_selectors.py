"""The operator dashboard's reads: the last hour's figures (status counts, throughput, failure
rate, step durations), how far behind the runners are (backlog, schedule-to-start) and the runs awaiting an operator's decision on a queue their workflow
declares with `choices`. The runs list itself comes from `selectors` (the consumers share it).

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

from django.db.models import Count, Q
from django.utils import timezone

from workflows import Workflow, conf
from workflows import backlog as telemetry_backlog
from workflows.core.durations import format_duration
from workflows.core.records import EntryStatus, RunStatus
from workflows.models import Attempt, Entry, Run, implied_attempts

from . import declarations
from .declarations import RunLabels

STATS_WINDOW = dt.timedelta(hours=1)
STATS_ROW_CAP = 20_000  # rows read for the percentiles of one window
DECISION_SCAN = 500  # open queue waits looked at, newest first


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
    """`using`: the database alias read (a replica, workflows.read_source; None: the default)."""
    now = now or timezone.now()
    since = now - STATS_WINDOW
    runs, entries = Run.objects.using(using), Entry.objects.using(using)
    counts = {status: 0 for status in RunStatus}
    for row in runs.order_by().values("status").annotate(n=Count("id")):
        counts[row["status"]] = row["n"]

    finished = list(
        runs.filter(finished_at__gte=since, finished_at__lte=now)
        .order_by()
        .values_list("id", "status", "finished_at")[:STATS_ROW_CAP]
    )
    by_status: dict[str, int] = defaultdict(int)
    bucket_count = 12
    buckets = [{"completed": 0, "failed": 0, "cancelled": 0} for _ in range(bucket_count)]
    for _, status, finished_at in finished:
        by_status[status] += 1
        index = int((finished_at - since).total_seconds() // (STATS_WINDOW.total_seconds() / bucket_count))
        if 0 <= index < bucket_count and status in buckets[index]:
            buckets[index][status] += 1
    # Runs whose step failed for good in the window and were replayed since: the failed record is
    # kept, superseded. Those that failed again are already counted by their status.
    failed_now = {run_id for run_id, status, _ in finished if status == RunStatus.FAILED}
    repaired: dict[Any, dt.datetime] = {}
    for run_id, failed_at in (
        entries.filter(
            superseded=True, status=EntryStatus.FAILED, finished_at__gte=since, finished_at__lte=now
        )
        .order_by()
        .values_list("run_id", "finished_at")[:STATS_ROW_CAP]
    ):
        if run_id not in failed_now:
            repaired[run_id] = min(failed_at, repaired.get(run_id, failed_at))
    for failed_at in repaired.values():
        index = int((failed_at - since).total_seconds() // (STATS_WINDOW.total_seconds() / bucket_count))
        if 0 <= index < bucket_count:
            buckets[index]["failed"] += 1
    peak = max([b["completed"] + b["failed"] + b["cancelled"] for b in buckets] + [1])
    for i, b in enumerate(buckets):
        b["height"] = round((b["completed"] + b["failed"] + b["cancelled"]) / peak * 100, 1)
        b["failed_height"] = round(b["failed"] / peak * 100, 1)
        b["label"] = (since + i * STATS_WINDOW / bucket_count).strftime("%H:%M")
    # A repaired run that completed since counts once: as a failure.
    completed = sum(
        1 for run_id, status, _ in finished if status == RunStatus.COMPLETED and run_id not in repaired
    )
    failed = len(failed_now) + len(repaired)
    attempt_counts = (
        Attempt.objects.using(using)
        .filter(finished_at__gte=since, finished_at__lte=now)
        .aggregate(total=Count("id"), failed=Count("id", filter=~Q(outcome="ok")))
    )
    # Steps that succeeded at their first attempt store no attempt row (`Entry.attempt_history`).
    attempt_counts["total"] += entries.filter(
        implied_attempts(), finished_at__gte=since, finished_at__lte=now
    ).count()

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
        durations[(workflow, name)].append((ended - started).total_seconds())
        if attempts > 1:
            retried[(workflow, name)] += 1
    step_stats = []
    for (workflow, name), values in sorted(durations.items()):
        values.sort()
        step_stats.append(
            StepStat(
                workflow=workflow,
                name=name,
                count=len(values),
                p50=format_duration(percentile(values, 50)),
                p95=format_duration(percentile(values, 95)),
                retried=retried[(workflow, name)],
            )
        )
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
        attempts_last_hour=attempt_counts["total"],
        failed_attempts_last_hour=attempt_counts["failed"],
        throughput_per_minute=len(finished) / (STATS_WINDOW.total_seconds() / 60),
        buckets=buckets,
        step_stats=step_stats,
    )


# --- how far behind the runners are -------------------------------------------------------------


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
    rows = telemetry_backlog.backlog(now, workflows=conf.registry().names(), using=using)
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


# --- decisions waiting on an operator ---------------------------------------------------------


@dataclass
class DecisionQueue:
    queue: str
    choices: list[str]  # the declared choices' labels, in order


@dataclass
class Decision:
    """A run waiting on one or more of its workflow's decision queues."""

    run_id: str
    workflow: str
    key: list[Any]
    wait: str  # the open wait's name
    since: dt.datetime
    labels: RunLabels
    queues: list[DecisionQueue]


def awaiting_decision(limit: int = 20, using: str | None = None) -> list[Decision]:
    """Runs waiting right now on a decision queue (`queue(..., choices=...)`) of the definition
    they run, oldest wait first. Only the (workflow, version) pairs that declare one are read; the
    queues a wait listens to live in its JSON input, so they are matched here rather than with a
    JSON lookup SQLite lacks. A workflow no registry of this server names declares nothing."""
    pairs = (
        Run.objects.using(using)
        .filter(status=RunStatus.WAITING)
        .order_by()
        .values_list("workflow", "version")
    )
    declared: dict[tuple[str, str], tuple[Workflow | None, dict[str, list[str]]]] = {}
    for workflow, version in pairs.distinct():
        definition = declarations.definition(workflow, version)
        queues = declarations.decision_queues(definition)
        if queues:
            declared[(workflow, version)] = (definition, queues)
    if not declared:
        return []
    of_declared = Q()
    for workflow, version in declared:
        of_declared |= Q(run__workflow=workflow, run__version=version)
    waits = (
        Entry.objects.using(using)
        .filter(
            of_declared,
            kind=Entry.Kind.QUEUE,
            status=EntryStatus.WAITING,
            superseded=False,
            run__status=RunStatus.WAITING,
        )
        .select_related("run")
        .order_by("-started_at")[:DECISION_SCAN]
    )
    found: dict[str, Decision] = {}
    for wait in waits:
        definition, queues = declared[(wait.run.workflow, wait.run.version)]
        listens = (wait.input or {}).get("queues") or []  # none named: every queue
        open_queues = [q for q in queues if not listens or q in listens]
        if not open_queues:
            continue
        decision = found.get(str(wait.run_id))
        if decision is None:  # a run whose join branches wait apart: one row, every queue
            decision = found[str(wait.run_id)] = Decision(
                run_id=str(wait.run_id),
                workflow=wait.run.workflow,
                key=wait.run.key,
                wait=wait.name,
                since=wait.started_at or wait.run.created_at,
                labels=declarations.labels_of(definition, wait.run.state),
                queues=[],
            )
        elif wait.started_at and wait.started_at < decision.since:
            decision.wait, decision.since = wait.name, wait.started_at
        seen = {dq.queue for dq in decision.queues}
        decision.queues += [DecisionQueue(q, queues[q]) for q in open_queues if q not in seen]
    return sorted(found.values(), key=lambda d: d.since)[:limit]


# --- limiters and their use ---------------------------------------------------------------------


@dataclass
class LimiterUse:
    name: str
    limits: str  # what it allows: "60 req/min, 4 at once"
    held: int  # attempts running under it now
    started: int  # attempts admitted in the last minute
    tokens: int  # tokens recorded in the last minute
    waiting: int  # steps waiting for it


def limiter_use(now: dt.datetime | None = None) -> list[LimiterUse]:
    """Every registered limiter with its use now (the runners share these figures)."""
    limiters = conf.registry().limiters
    if not limiters:
        return []
    now = now or timezone.now()
    names = sorted(limiters)
    figures = conf.default_store().limiter_use(names, now=now)
    waiting = Entry.objects.filter(kind=Entry.Kind.STEP, status=Entry.Status.WAITING, superseded=False)
    return [
        LimiterUse(
            name=name,
            limits=limiters[name].describe(),
            held=figures[name]["held"],
            started=figures[name]["started"],
            tokens=figures[name]["tokens"],
            waiting=waiting.filter(meta__waiting_for__limiter=name).count(),
        )
        for name in names
    ]
