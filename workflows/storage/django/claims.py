"""A Django store's claims and leases (`DjangoClaims`)."""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from django.db import (
    connection,
    transaction,
)
from django.db.models import Count, Q

from ...core.concurrency import GroupUse
from ...core.records import (
    LIVE,
    RunRecord,
    RunStatus,
)
from ...models import Run, WorkflowPause
from . import notify, paths, resumes, statements, values, writes
from .paths import StorePaths
from .prepared import hot_cursor
from .reconnect import retrying_lost_races
from .rows import (
    ENTRY_FIELDS,
    MESSAGE_FIELDS,
    RUN_COLUMNS,
    run_from_row,
    timestamp,
)
from .statements import postgres, shared

CLAIM_RETURNING = ", ".join("workflows_run." + c for c in RUN_COLUMNS)  # what a claim's update returns
CLAIMED_HISTORY = postgres.CLAIMED_HISTORY.format(columns=", ".join(ENTRY_FIELDS))
CLAIMED_MESSAGES = postgres.CLAIMED_MESSAGES.format(columns=", ".join(MESSAGE_FIELDS))
PREFETCHED_MAX = 10_000  # resumes read by claims and not yet used: more means none will be


class DjangoClaims(StorePaths):
    """A runner's side of the runs: claims, leases, concurrency groups."""

    def claim(
        self,
        *,
        owner: str,
        workflows: list[str],
        limit: int,
        lease_seconds: float,
        now: dt.datetime,
        concurrency: Mapping[str, int] | None = None,
    ) -> list[RunRecord]:
        """Workflows with no concurrency limit: one statement picks due runs (SKIP LOCKED on
        PostgreSQL), leases them and returns them whole, each marked `fresh` when it never ran
        before (no history to load). Workflows with one: `CLAIM_GROUPED` under their advisory
        lock. Higher priority first, FIFO within one."""
        caps = {name: cap for name, cap in sorted((concurrency or {}).items()) if name in workflows}
        plain = [name for name in workflows if name not in caps]
        lease = shared.claim_lease(owner, now + dt.timedelta(seconds=lease_seconds), now)
        rows = []
        if plain:
            rows += _claim(statements.claim_due(plain, limit, now), lease)
        if caps and len(rows) < limit:
            free = limit - len(rows)
            pick = shared.claim_grouped(caps, max(free * 4, 32), free, now)
            rows += _claim(pick, lease, lock=list(caps), park=shared.park_held(caps, now))
        return _claimed_runs(rows, now)

    async def aclaim(
        self,
        *,
        owner: str,
        workflows: list[str],
        limit: int,
        lease_seconds: float,
        now: dt.datetime,
        concurrency: Mapping[str, int] | None = None,
    ) -> list[RunRecord]:
        """A claim of workflows with no concurrency limit goes the connector's way (`read`: a
        runner's on PostgreSQL, from its event loop), with the resume reads of the runs it takes;
        the rest through the threads."""
        # The connector may not read now (no loop connection, one call in flight, a statement
        # refused): the threads then. A claim of limited workflows takes their advisory lock in
        # a transaction of several statements, which only the threads' connection holds.
        if self.connector.reads_here and not set(concurrency or ()) & set(workflows):
            lease_until = now + dt.timedelta(seconds=lease_seconds)
            lease = shared.claim_lease(owner, lease_until, now)
            claim = _claim_statement(statements.claim_due(workflows, limit, now), lease, lazy=True)
            claimed_before = [values.t(lease_until), owner, RunStatus.RUNNING]
            rows = await self.connector.read(
                [
                    (postgres.GENERIC_PLAN, []),
                    claim,
                    (CLAIMED_HISTORY, claimed_before),
                    (CLAIMED_MESSAGES, [*claimed_before, resumes.RESUME_MESSAGES + 1]),
                ]
            )
            if rows is not None:
                runs = _claimed_runs(rows[1], now)
                self._keep_prefetched(runs, rows[2], rows[3])
                return runs
        runs = await self.run_sync(
            self.claim, owner=owner, workflows=workflows, limit=limit, lease_seconds=lease_seconds,
            now=now, concurrency=concurrency,
        )  # fmt: skip
        for run in runs:  # never resumed from an earlier claim's read (none is left unused)
            self._prefetched.pop(run.id, None)
        return runs

    def next_wake_at(
        self, *, owner: str, workflows: list[str], concurrency: Mapping[str, int] | None = None
    ) -> dt.datetime | None:
        """One query, whatever `concurrency`: a claim sets the runs due in a full group aside (wake_at
        NULL, see shared.PARK_HELD), so they are not seen here; one that became due since the last
        claim costs one more claim, which sets it aside."""
        return (
            Run.objects.filter(wake_at__isnull=False, status__in=LIVE, workflow__in=workflows)
            .exclude(status=RunStatus.RUNNING, lease_owner=owner)
            .exclude(workflow__in=WorkflowPause.objects.values("workflow"))  # claims skip them
            .order_by("wake_at")
            .values_list("wake_at", flat=True)
            .first()
        )

    def unpark_held(self, workflows: list[str]) -> int:
        """One statement (`shared.UNPARK_ALL`) and, when it put any back, the NOTIFY that wakes runners."""
        if not workflows:
            return 0
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(*shared.unpark_all(workflows))
            count = max(0, cursor.rowcount)
            if count:
                notify.notify(cursor)
        return count

    def concurrency_use(self, caps: Mapping[str, int], *, now: dt.datetime) -> list[GroupUse]:
        if not caps:
            return []
        rows = (
            Run.objects.filter(
                concurrency_group__isnull=False,
                workflow__in=list(caps),
                status__in=LIVE,
            )
            .filter(Q(wake_at__isnull=False) | Q(held_at__isnull=False))
            .values("concurrency_group", "workflow")
            .annotate(
                running=Count("id", filter=Q(status=RunStatus.RUNNING, wake_at__gt=now)),
                waiting=Count("id", filter=Q(wake_at__lte=now) | Q(held_at__isnull=False)),
            )
        )
        uses = [
            GroupUse(
                group=str(row["concurrency_group"]),
                workflow=row["workflow"],
                running=row["running"],
                max=caps[row["workflow"]],
                waiting=row["waiting"],
            )
            for row in rows
            if row["running"] or row["waiting"]
        ]
        return sorted(uses, key=lambda u: (-u.running - u.waiting, u.group))

    def heartbeat(
        self, *, owner: str, run_ids: list[str], lease_seconds: float, now: dt.datetime
    ) -> dict[str, bool]:
        """On PostgreSQL the rows a write in flight holds are renewed after the others, each in a
        statement of its own: a statement that waits for a row never holds another (see
        postgres.HEARTBEAT_SKIP_LOCKED). A run missing from the answer is no longer this owner's."""
        if not run_ids:
            return {}
        lease_until = now + dt.timedelta(seconds=lease_seconds)
        fixed = [values.t(lease_until), owner, RunStatus.RUNNING]
        skip_locked = values.pg() and len(run_ids) > 1
        statement = postgres.HEARTBEAT_SKIP_LOCKED if skip_locked else shared.HEARTBEAT
        with connection.cursor() as cursor:
            cursor.execute(
                statement.format(ids=values.marks(len(run_ids))), [*fixed, *map(values.rid, run_ids)]
            )
            rows = cursor.fetchall()
            if skip_locked:
                renewed = {str(Run._meta.pk.to_python(row[0])) for row in rows}
                for run_id in [r for r in run_ids if r not in renewed]:  # locked, or not ours
                    cursor.execute(shared.HEARTBEAT.format(ids=values.marks(1)), [*fixed, values.rid(run_id)])
                    rows += cursor.fetchall()
        return {str(Run._meta.pk.to_python(row[0])): bool(row[1]) for row in rows}

    @retrying_lost_races  # it may cross a cut run's last commit, still in flight
    def release(self, *, owner: str, run_ids: list[str], now: dt.datetime) -> None:
        if not run_ids:
            return
        with transaction.atomic():
            released = Run.objects.select_for_update().filter(
                id__in=run_ids, lease_owner=owner, status=RunStatus.RUNNING
            )
            for run in released:  # their steps were cut mid-attempt: those attempts are lost
                writes.recover_cut_attempts(run, f"runner {owner} stopped before the step finished", now, now)
            released.update(
                status=RunStatus.PENDING, lease_owner="", wake_at=now, updated_at=now, transitioned_at=now
            )
            notify.notify_now()  # another runner takes them at once

    def _keep_prefetched(self, runs: list[RunRecord], history: list[Any], messages: list[Any]) -> None:
        """What a claim read for its runs that ran before (`postgres.CLAIMED_HISTORY`), kept for their
        `aload_resume`, which follows at once. Not for a run taken over: its recovery of the cut
        attempts writes first."""
        if len(self._prefetched) > PREFETCHED_MAX:  # runs never resumed here (none expected)
            self._prefetched.clear()
        entries: dict[str, list[Any]] = {}
        for run_id, *entry in history:
            entries.setdefault(str(run_id), []).append(entry)
        unconsumed: dict[str, list[Any]] = {}
        for row in messages:
            unconsumed.setdefault(str(row[1]), []).append(row)  # MESSAGE_FIELDS[1]: run_id
        for run in runs:
            if not run.fresh and not run.taken_over:
                self._prefetched[run.id] = resumes.resumed(
                    entries.get(run.id, []), unconsumed.get(run.id, [])
                )
            else:
                self._prefetched.pop(run.id, None)


def _claim(
    pick: tuple[str, list[Any]],
    lease: tuple[str, list[Any]],
    lock: list[str] | None = None,
    park: tuple[str, list[Any]] | None = None,
) -> list[Any]:
    """Lease the runs `pick` selects (id and was-columns; on PostgreSQL it locks them, SKIP LOCKED):
    rows of RUN_COLUMNS then the was-columns.
    With `lock` (PostgreSQL), first take those workflows' group lock in the same transaction;
    `park` runs (in it) before the pick. On PostgreSQL the claim's commit does not wait for the
    disk (`postgres.LAZY_FLUSH` says why that is safe) and an ungrouped pick keeps its generic plan
    (`postgres.GENERIC_PLAN`), unless the caller's transaction holds the claim: a setting would last
    to the end of that transaction, and its other writes must wait for the disk."""
    due, due_params = pick
    statement, lease_params = lease
    if values.pg():
        own_transaction = not connection.in_atomic_block
        claim, params = _claim_statement(pick, lease, lazy=own_transaction)
        if own_transaction and not lock and not park and paths.pipelines():
            with hot_cursor() as setting, hot_cursor() as cursor:
                with connection.connection.pipeline():  # one round trip, one transaction
                    setting.execute(postgres.GENERIC_PLAN)
                    cursor.execute(claim, params)
                return cursor.fetchall()
        with contextlib.ExitStack() as stack:
            if lock:  # the claim's snapshot must be taken after the lock: a statement of its own
                stack.enter_context(transaction.atomic())
            cursor = stack.enter_context(hot_cursor())
            if lock:
                cursor.execute(postgres.GROUP_LOCK, [postgres.GROUP_LOCK_SPACE, lock])
            if park:
                cursor.execute(*park)
            cursor.execute(claim, params)
            return cursor.fetchall()
    # SQLite: the IMMEDIATE transaction excludes other writers between the two statements
    with transaction.atomic(), connection.cursor() as cursor:
        if park:
            cursor.execute(*park)
        cursor.execute(due, due_params)
        was = {str(uuid.UUID(str(row[0]))): row[1:] for row in cursor.fetchall()}
        if not was:
            return []
        cursor.execute(
            f"{statement} WHERE id IN ({values.marks(len(was))}) RETURNING {CLAIM_RETURNING}",
            lease_params + [values.rid(rid) for rid in was],
        )
        return [(*row, *was[str(uuid.UUID(str(row[0])))]) for row in cursor.fetchall()]


def _claim_statement(
    pick: tuple[str, list[Any]], lease: tuple[str, list[Any]], lazy: bool
) -> tuple[str, list[Any]]:
    """PostgreSQL: the update that leases the runs `pick` selects, and its parameters. `lazy`:
    its commit does not wait for the disk (`postgres.LAZY_FLUSH`)."""
    due, due_params = pick
    statement, lease_params = lease
    flush = f", {postgres.LAZY_FLUSH}" if lazy else ""
    text = (
        f"{statement} FROM ({due}) AS claimed{flush} WHERE workflows_run.id = claimed.claim_id"
        f" RETURNING {CLAIM_RETURNING}, claimed.was_started, claimed.was_status, claimed.was_owner,"
        " claimed.was_due"
    )
    return text, lease_params + due_params


def _claimed_runs(rows: list[Any], now: dt.datetime) -> list[RunRecord]:
    """A claim's rows (RUN_COLUMNS, then the was-columns) as runs, in claim order."""
    runs = []
    for *row, was_started, was_status, was_owner, was_due in rows:
        run = replace(run_from_row(tuple(row), fresh=was_started is None), due_at=timestamp(was_due))
        if was_status == RunStatus.RUNNING:  # left by a runner whose lease lapsed
            run = replace(run, taken_over=True, previous_owner=was_owner, lease_lapsed_at=timestamp(was_due))
        runs.append(run)
    return sorted(runs, key=lambda r: (-r.priority, r.due_at or now, r.id))
