"""Deleting finished runs past their retention (`workflows.core.retention`), with everything that
refers to them, on SQLite and PostgreSQL.

Each batch is one short transaction: take up to `batch_size` due runs (on PostgreSQL `FOR UPDATE
SKIP LOCKED`: a run an operator is replaying at that instant is skipped, never waited for, and
its status cannot change under the batch), then delete their attempts, messages, events, audit
entries, entries and the runs, children first (the foreign keys have no ON DELETE in the
database). Only finished runs are ever selected; nothing links one run to another (no parent
waits on a child), so no finished run is needed by a live one. A run deleted here is gone: a
later `get_or_create` of its key starts a new run.

One pruner at a time is enough: on PostgreSQL a session advisory lock (`pg_try_advisory_lock`)
makes a second one return at once (`PruneReport.skipped`); SQLite has one writer anyway.
The statements live here rather than in `sql`: nothing else uses them.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, connections, transaction
from django.utils import timezone

from ...core.retention import PRUNABLE, Retention
from .reconnect import reconnecting
from .rows import timestamp
from .statements.postgres import PRUNE_LOCK, PRUNE_UNLOCK
from .statements.shared import (
    PRUNE_AUDITED,
    PRUNE_COUNTS,
    PRUNE_DELETES,
    PRUNE_DUE,
    PRUNE_DUE_RUN_IDS,
    PRUNE_DUE_RUNS,
    PRUNE_RUNS,
)
from .values import t

logger = logging.getLogger(__name__)

LOCK_KEY = 0x77665F7072756E65  # "wf_prune": the advisory lock one pruner holds on PostgreSQL

TABLES = tuple(table for table, _ in PRUNE_DELETES if table)


@dataclass
class PruneReport:
    """What a prune deleted (or, dry, would delete): runs by status, rows by table."""

    dry_run: bool = False
    skipped: bool = False  # another process was pruning (PostgreSQL's advisory lock)
    runs: dict[str, int] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    batches: int = 0
    seconds: float = 0.0

    @property
    def total_runs(self) -> int:
        return sum(self.runs.values())

    def lines(self) -> list[str]:
        """The report for people, one line each."""
        if self.skipped:
            return ["another process is pruning; nothing done"]
        verb = "would delete" if self.dry_run else "deleted"
        by_status = ", ".join(f"{n} {status}" for status, n in self.runs.items() if n) or "none"
        out = [f"{verb} {self.total_runs} run(s): {by_status}"]
        if self.total_runs:
            out.append("  rows: " + ", ".join(f"{table} {self.rows.get(table, 0)}" for table in TABLES))
        if not self.dry_run:
            rate = self.total_runs / self.seconds if self.seconds > 0 else 0.0
            out.append(f"  {self.batches} batch(es) in {self.seconds:.2f}s ({rate:,.0f} runs/s)")
        return out


def prune(
    retention: Retention,
    *,
    now: dt.datetime | None = None,
    batch_size: int = 100,
    dry_run: bool = False,
    max_batches: int | None = None,
    using: str = "default",
    on_batch: Callable[[PruneReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> PruneReport:
    """Delete (or with `dry_run` count) the finished runs `retention` says are due at `now`, in
    transactions of at most `batch_size` runs, oldest first; stop after `max_batches`, or
    between batches once `should_stop()` says so. `on_batch` sees the report after each batch."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    now = now or timezone.now()
    report = PruneReport(dry_run=dry_run)
    if not retention.enabled:
        return report
    connection = connections[using]
    if dry_run:
        _count(retention, now, report, using)
        return report
    locked = _lock(using)
    if not locked:
        report.skipped = True
        return report
    started = time.perf_counter()
    try:
        for status in PRUNABLE:
            if should_stop is not None and should_stop():
                break
            query = _due_query(retention, status, now, batch_size, connection.vendor == "postgresql")
            if query is None:
                continue
            while max_batches is None or report.batches < max_batches:
                with transaction.atomic(using=using), connection.cursor() as cursor:
                    cursor.execute(*query)
                    ids = [row[0] for row in cursor.fetchall()]
                    if not ids:
                        break
                    marks = ", ".join(["%s"] * len(ids))
                    for table, statement in PRUNE_DELETES:
                        cursor.execute(statement.format(ids=marks), ids)
                        if table:
                            report.rows[table] = report.rows.get(table, 0) + max(cursor.rowcount, 0)
                report.runs[status] = report.runs.get(status, 0) + len(ids)
                report.batches += 1
                report.seconds = time.perf_counter() - started
                if on_batch is not None:
                    on_batch(report)
                if len(ids) < batch_size or (should_stop is not None and should_stop()):
                    break
    finally:
        _unlock(using, locked)
    report.seconds = time.perf_counter() - started
    return report


async def prune_in_own_thread(retention: Retention, *, batch_size: int) -> PruneReport:
    """For the runner's periodic prune: the work runs in a worker thread of the loop's default
    executor (where sync steps run, so the connection pool's sizing for the runner already
    counts it), with that thread's own connection, closed after; never in one of the runner's
    database threads, whose claims and commits it must not hold up."""

    stop = threading.Event()

    @reconnecting  # the database out of reach: StoreUnavailable, logged in one line
    def work() -> PruneReport:
        try:
            return prune(retention, batch_size=batch_size, should_stop=stop.is_set)
        finally:
            connections.close_all()  # this thread's connections only

    try:
        report = await asyncio.to_thread(work)
    except asyncio.CancelledError:  # a stopping runner: the thread ends after its current batch
        stop.set()
        raise
    if report.total_runs:
        logger.info("pruned finished runs: %s", "; ".join(line.strip() for line in report.lines()))
    return report


# --- the statements ---------------------------------------------------------------------------------


def _due_query(
    retention: Retention, status: str, now: dt.datetime, limit: int, on_pg: bool
) -> tuple[str, list[Any]] | None:
    """The ids of up to `limit` runs of `status` due for pruning, oldest first; None when the
    status is kept forever. `created_at < cutoff` adds nothing (a run finishes after it starts)
    but lets the (status, created_at) index bound the scan."""
    cutoff = retention.cutoff(status, now)
    if cutoff is None:
        return None
    where, params = _due_where(retention, status, cutoff, now)
    lock = " FOR UPDATE OF r SKIP LOCKED" if on_pg else ""
    return PRUNE_DUE_RUN_IDS.format(where=where, lock=lock), [*params, limit]


def _due_where(
    retention: Retention, status: str, cutoff: dt.datetime, now: dt.datetime
) -> tuple[str, list[Any]]:
    where = PRUNE_DUE
    params: list[Any] = [status, t(cutoff), t(cutoff)]
    audit_cutoff = retention.audit_cutoff(now)
    if audit_cutoff is None:
        where += f" AND NOT EXISTS ({PRUNE_AUDITED})"
    else:
        where += f" AND NOT EXISTS ({PRUNE_AUDITED} AND a.created_at >= %s)"
        params.append(t(audit_cutoff))
    return where, params


def _count(retention: Retention, now: dt.datetime, report: PruneReport, using: str) -> None:
    """A dry run: how many runs of each status, and rows of each table, a prune would delete."""
    with connections[using].cursor() as cursor:
        for status in PRUNABLE:
            cutoff = retention.cutoff(status, now)
            if cutoff is None:
                continue
            where, params = _due_where(retention, status, cutoff, now)
            runs = PRUNE_RUNS.format(where=where)
            for table, statement in PRUNE_COUNTS.items():
                cursor.execute(statement.format(runs=runs), params)
                count = cursor.fetchone()[0]
                report.rows[table] = report.rows.get(table, 0) + count
                if table == "workflows_run":
                    report.runs[status] = count


def _lock(using: str) -> bool:
    connection = connections[using]
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute(PRUNE_LOCK, [LOCK_KEY])
        return bool(cursor.fetchone()[0])


def _unlock(using: str, locked: bool) -> None:
    connection = connections[using]
    if locked and connection.vendor == "postgresql" and connection.connection is not None:
        # A connection that broke took its session lock with it: nothing to release then.
        with contextlib.suppress(DatabaseError), connection.cursor() as cursor:
            cursor.execute(PRUNE_UNLOCK, [LOCK_KEY])


def due_runs(
    retention: Retention, *, now: dt.datetime | None = None, limit: int = 1000, using: str = "default"
) -> list[tuple[Any, str, str, dt.datetime | None]]:
    """(id, workflow, status, finished_at) of up to `limit` runs due for pruning at `now`, oldest
    first by status: what a dry run lists."""
    now = now or timezone.now()
    rows: list[tuple[Any, str, str, dt.datetime | None]] = []
    with connections[using].cursor() as cursor:
        for status in PRUNABLE:
            cutoff = retention.cutoff(status, now)
            if cutoff is None or len(rows) >= limit:
                continue
            where, params = _due_where(retention, status, cutoff, now)
            cursor.execute(PRUNE_DUE_RUNS.format(where=where), [*params, limit - len(rows)])
            rows += [(row[0], row[1], row[2], timestamp(row[3])) for row in cursor.fetchall()]
    return rows
