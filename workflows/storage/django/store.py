"""The real store: the engine's tables over Django's connection, on SQLite and PostgreSQL.

The hot path (commit, claim, heartbeat) is plain SQL from `sql`, so that a recorded step costs a
handful of statements in one transaction (`writes`); reads use the ORM. Operators' repairs are
in `repairs`, waking runners in `notify`, rows to records in `rows`. Methods run in Django's
database thread when called through their `a`-prefixed twins, but for a runner's on PostgreSQL:
its step commits, claims (with the resume reads of the runs they take), run starts and run reads
go from its event loop (`async_commits`, `loop_reads`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import functools
import logging
import threading
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import (
    IntegrityError,
    connection,
    connections,
    transaction,
)
from django.db.models import Count, Q

from ...core.clock import AnchoredClock, Clock
from ...core.concurrency import GroupUse
from ...core.exceptions import LeaseLost, RunNotFound
from ...core.keys import key_identity, quoted
from ...core.limits import Grant, Limiter
from ...core.new_run import NewRun
from ...core.records import (
    LIVE,
    TERMINAL,
    Audit,
    AuditAction,
    Commit,
    CommitResult,
    EntryRecord,
    EventRecord,
    MessageRecord,
    OutgoingMessage,
    RunRecord,
    RunStatus,
)
from ...models import Message, Run
from ..base import Store
from . import limits, loop_connection, notify, prepared, statements, values, writes
from .async_commits import AsyncCommits
from .group_commit import GroupCommits
from .loop_reads import LoopReads
from .prepared import hot_cursor
from .presence import DjangoPresence
from .reconnect import reconnecting, retrying_lost_races
from .repairs import DjangoRepairs, write_audit
from .rows import (
    ENTRY_FIELDS,
    MESSAGE_FIELDS,
    RUN_COLUMNS,
    entry_from_row,
    events_after,
    message_from_row,
    message_record,
    run_from_row,
    run_record,
    timestamp,
)
from .schedules import DjangoSchedules
from .sqlite_loop import SqliteLoopCommits, loop_params, passive_checkpoint
from .statements import postgres, shared

P = ParamSpec("P")
R = TypeVar("R")
logger = logging.getLogger(__name__)

# Unconsumed messages read with a resumed run's history; a run with more reads them when it waits.
RESUME_MESSAGES = 100
# The hot reads' texts, built once (not at every call).
RUN_READ = shared.SELECT_RUN.format(columns=", ".join(RUN_COLUMNS))
HISTORY_READ = shared.SELECT_HISTORY.format(columns=", ".join(ENTRY_FIELDS))
CLAIM_RETURNING = ", ".join("workflows_run." + c for c in RUN_COLUMNS)  # what a claim's update returns
RESUME_READ = shared.select_available_messages(", ".join(MESSAGE_FIELDS), 0)  # a resumed run's messages
CLAIMED_HISTORY = postgres.CLAIMED_HISTORY.format(columns=", ".join(ENTRY_FIELDS))
CLAIMED_MESSAGES = postgres.CLAIMED_MESSAGES.format(columns=", ".join(MESSAGE_FIELDS))
PREFETCHED_MAX = 10_000  # resumes read by claims and not yet used: more means none will be


class DjangoStore(DjangoPresence, DjangoSchedules, DjangoRepairs, Store):
    """With no `db_threads` its calls run in Django's sync thread (`sync_to_async`), sharing the
    caller's connection and transaction, as tests and views need. A runner gives it a pool of
    database threads instead (one connection each): runs then wait on the database in parallel,
    and a call costs a plain executor hop. SQLite always gets one thread: it has one writer, and
    its change check (data_version) must ask the connection that writes."""

    @property
    def shared_clock(self) -> Clock:
        """The database's clock (`Store.shared_clock`), one for the process (every Django store
        reads the same database), unless `WORKFLOWS["CLOCK"]` is "local": this host's wall clock,
        as before the engine took shared decisions on the database's (for one host only, or to
        see the multi-host tests fail)."""
        choice = getattr(settings, "WORKFLOWS", {}).get("CLOCK", "database")
        if choice == "local":
            return _LOCAL_CLOCK
        if choice != "database":
            raise ValueError(f'WORKFLOWS["CLOCK"] must be "database" or "local", not {choice!r}')
        return _database_clock()

    def __init__(self, db_threads: int | None = None) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._threads = 0
        if db_threads is not None:
            self._threads = 1 if connection.vendor == "sqlite" else max(1, db_threads)
            self._executor = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="workflows-db")
        # A runner's store on PostgreSQL: its step commits go from the event loop on an async
        # connection of its own (`async_commits`), or, with ASYNC_COMMITS off, through the
        # threads with group commit (`group_commit`); everything else goes through the threads.
        self._group: AsyncCommits | GroupCommits | None = None
        if self._executor is not None and connection.vendor == "postgresql":
            if _setting("ASYNC_COMMITS"):
                self._group = AsyncCommits(
                    connect=self._loop_connection,
                    alone=self._commit_in_thread,
                    group=_setting("GROUP_COMMIT"),
                )
            elif _setting("GROUP_COMMIT"):
                self._group = GroupCommits(self._executor.submit, self.commit)
        # A runner's store on SQLite: its step commits are written from the event loop on a
        # connection of its own while the one database thread is idle (`sqlite_loop`).
        self._sqlite_loop: SqliteLoopCommits | None = None
        self._submitted = self._finished = 0  # calls sent to the thread, and ended there
        self._ended_lock = threading.Lock()  # `_finished` moves in the thread and in the loop
        if self._executor is not None and connection.vendor == "sqlite" and _setting("ASYNC_COMMITS"):
            self._sqlite_loop = SqliteLoopCommits(
                params=lambda: self.run_sync(loop_params),
                thread_idle=lambda: self._submitted == self._finished,
                alone=self._commit_in_thread,
                checkpoint=self._checkpoint_in_thread,
            )
        # ... and its claims and resume reads on another (`loop_reads`), when libpq pipelines.
        self._reads: LoopReads | None = None
        self._prefetched: dict[str, tuple[list[EntryRecord], list[MessageRecord] | None]] = {}
        if self._executor is not None and connection.vendor == "postgresql":
            if _setting("ASYNC_CLAIMS") and _pipelines():
                self._reads = LoopReads(self._loop_connection)

    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """In Django's database thread, or this store's own threads (`threads`)."""
        if self._executor is None:
            return await sync_to_async(reconnecting(fn), thread_sensitive=True)(*args, **kwargs)
        call = functools.partial(reconnecting(fn), *args, **kwargs)
        if self._sqlite_loop is None:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        try:
            return await asyncio.wrap_future(self._submit_counted(call))
        finally:
            self._sqlite_loop.thread_returned()

    def _submit_counted(self, call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """SQLite's one database thread: a call counted in flight until it ends, or is cancelled
        before it started (a cancelled waiter's queued call never runs)."""
        assert self._executor is not None
        self._submitted += 1  # in the loop only
        try:
            future = self._executor.submit(call)
        except BaseException:
            self._submitted -= 1
            raise
        future.add_done_callback(self._call_ended)  # in the thread, or where it was cancelled
        return future

    def _call_ended(self, _future: concurrent.futures.Future[Any]) -> None:
        with self._ended_lock:
            self._finished += 1

    def _checkpoint_in_thread(self) -> None:
        """Counted in flight, not awaited: the loop's commits wait for it, so it copies the whole
        WAL and the next write starts the WAL file over."""
        if self._executor is not None and self._sqlite_loop is not None:
            with contextlib.suppress(RuntimeError):  # the store is closing
                done = asyncio.wrap_future(self._submit_counted(passive_checkpoint))
                done.add_done_callback(self._checkpoint_returned)

    def _checkpoint_returned(self, _done: asyncio.Future[None]) -> None:
        if self._sqlite_loop is not None:
            self._sqlite_loop.thread_returned()

    def close(self) -> None:
        """Close the pool's connections and threads (a stopping runner)."""
        if self._group is not None and self._group.commits:
            logger.info(
                "group commit: %d step commits written in %d statements (at most %d in one)",
                self._group.commits, self._group.statements, self._group.largest_batch,
            )  # fmt: skip
        if self._sqlite_loop is not None and (self._sqlite_loop.commits or self._sqlite_loop.through_thread):
            logger.info(
                "SQLite: %d step commits written from the event loop, %d through the database thread",
                self._sqlite_loop.commits, self._sqlite_loop.through_thread,
            )  # fmt: skip
        if self._executor is not None:
            barrier = threading.Barrier(self._threads)

            def close_this_threads_connection() -> None:
                barrier.wait(timeout=10)  # one task per thread: every thread closes its own
                connections.close_all()

            for _ in range(self._threads):
                self._executor.submit(close_this_threads_connection)
            self._executor.shutdown(wait=True)
        if self._group is not None:
            self._group.close()
        if self._reads is not None:
            self._reads.close()
        if self._sqlite_loop is not None:
            self._sqlite_loop.close()

    async def _loop_connection(self) -> Any:
        params, role = await self.run_sync(_connection_params)
        return await loop_connection.open_connection(params, prepared.enabled(), role)

    async def _commit_in_thread(self, pending: writes.Pending) -> CommitResult:
        run_id, owner, commit, now = pending
        return await self.run_sync(self.commit, run_id=run_id, owner=owner, commit=commit, now=now)

    # --- runs -----------------------------------------------------------------------------------

    def get_or_create_run(self, new: NewRun) -> tuple[RunRecord, bool]:
        if values.pg():  # one statement creates it (and wakes runners) unless the key is taken
            created = writes.insert_run_if_new(new)
            if created is not None:
                return created, True
        key_hash = key_identity(new.key)[1]
        existing = Run.objects.filter(workflow=new.workflow, key_hash=key_hash).first()
        if existing is not None:
            return run_record(existing), False
        try:
            run = writes.start_run(new)
        except IntegrityError:  # created meanwhile by another caller with the same key
            return run_record(Run.objects.get(workflow=new.workflow, key_hash=key_hash)), False
        return run_record(run), True

    def get_or_create_held_run(
        self, new: NewRun, *, owner: str, lease_seconds: float
    ) -> tuple[RunRecord, bool, bool]:
        """A new run leased to `owner`: on PostgreSQL one statement (`writes.held_run_statement`), on
        SQLite one transaction (`writes.create_held_run`); a key already taken answers its run,
        not held."""
        new = _holdable(new)
        statement = writes.held_run_statement(new, owner, new.now + dt.timedelta(seconds=lease_seconds))
        if values.pg():
            with hot_cursor() as cursor:
                cursor.execute(statement.sql, statement.params)
                created = cursor.fetchone() is not None
        else:
            created = writes.create_held_run(statement.record)
        if created:
            return statement.record, True, True
        run, created = self.get_or_create_run(new)
        return run, created, False

    async def aget_or_create_held_run(
        self, new: NewRun, *, owner: str, lease_seconds: float
    ) -> tuple[RunRecord, bool, bool]:
        """From the runner's event loop (`loop_reads`) unless a call is in flight there."""
        if self._reads is not None and not self._reads.busy:
            new = _holdable(new)
            statement = writes.held_run_statement(new, owner, new.now + dt.timedelta(seconds=lease_seconds))
            rows = await self._reads.fetch([(statement.sql, statement.params)])
            if rows is not None:
                if rows[0]:
                    return statement.record, True, True
                run, created = await self.run_sync(self.get_or_create_run, new)  # the key is taken
                return run, created, False
        return await self.run_sync(self.get_or_create_held_run, new, owner=owner, lease_seconds=lease_seconds)

    async def aget_or_create_run(self, new: NewRun) -> tuple[RunRecord, bool]:
        """A runner's store (a run started by a workflow's code, `Runner.start`) creates from its
        event loop (`loop_reads`) unless a call is in flight there; a taken key goes through the
        threads, which read its run."""
        if self._reads is not None and not self._reads.busy:
            statement = writes.new_run_statement(new)
            rows = await self._reads.fetch([(statement.sql, statement.params)])
            if rows is not None and rows[0]:
                return statement.record, True
        return await self.run_sync(self.get_or_create_run, new)

    async def aget_run(self, run_id: str) -> RunRecord:
        """A runner's store reads from its event loop (`loop_reads`) unless a call is in flight there."""
        if self._reads is not None and not self._reads.busy:
            try:
                rid = values.rid(run_id)
            except (ValidationError, ValueError, TypeError):  # not a UUID
                raise RunNotFound(f"no run with id {quoted(run_id)}") from None
            rows = await self._reads.fetch([(RUN_READ, [rid])])
            if rows is not None:
                if not rows[0]:
                    raise RunNotFound(f"no run with id {quoted(run_id)}")
                return run_from_row(rows[0][0])
        return await self.run_sync(self.get_run, run_id)

    def get_run(self, run_id: str) -> RunRecord:
        """One prepared statement, no model instance: clients poll it (`handle.info()`)."""
        try:
            rid = values.rid(run_id)
        except (ValidationError, ValueError, TypeError):  # not a UUID
            raise RunNotFound(f"no run with id {quoted(run_id)}") from None
        with hot_cursor() as cursor:
            cursor.execute(RUN_READ, [rid])
            row = cursor.fetchone()
        if row is None:
            raise RunNotFound(f"no run with id {quoted(run_id)}")
        return run_from_row(row)

    def find_run(self, workflow: str, key: list[str]) -> RunRecord:
        run = Run.objects.filter(workflow=workflow, key_hash=key_identity(key)[1]).first()
        if run is None:
            raise RunNotFound(f"no {workflow} run with key {quoted(key)}")
        return run_record(run)

    # --- the runner's side ----------------------------------------------------------------------

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
        """A runner's claim of workflows with no concurrency limit goes from its event loop
        (`loop_reads`) unless a call is in flight there; the rest through the threads."""
        if self._reads is not None and not self._reads.busy and not set(concurrency or ()) & set(workflows):
            lease_until = now + dt.timedelta(seconds=lease_seconds)
            lease = shared.claim_lease(owner, lease_until, now)
            claim = _claim_statement(statements.claim_due(workflows, limit, now), lease, lazy=True)
            claimed_before = [values.t(lease_until), owner, RunStatus.RUNNING]
            rows = await self._reads.fetch(
                [
                    (postgres.GENERIC_PLAN, []),
                    claim,
                    (CLAIMED_HISTORY, claimed_before),
                    (CLAIMED_MESSAGES, [*claimed_before, RESUME_MESSAGES + 1]),
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

    def recover_cut_attempts(
        self, run_id: str, *, owner: str, reason: str, lost_at: dt.datetime | None, now: dt.datetime
    ) -> None:
        with transaction.atomic():
            run = (
                Run.objects.select_for_update()
                .filter(id=run_id, lease_owner=owner, status=RunStatus.RUNNING)
                .first()
            )
            if run is None:
                raise LeaseLost(f"run {run_id} is no longer held by {owner}")
            writes.recover_cut_attempts(run, reason, lost_at, now)

    def load_history(self, run_id: str) -> list[EntryRecord]:
        """One prepared statement, no model instances: every resumed execution reads it."""
        with hot_cursor() as cursor:
            cursor.execute(HISTORY_READ, [values.rid(run_id)])
            return [entry_from_row(row) for row in cursor.fetchall()]

    @retrying_lost_races  # failing it would run its step again
    def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        return writes.commit(run_id, owner, commit, now)

    async def acommit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        """A runner's store: on PostgreSQL a step's commit goes on the async path, where it may
        share one statement with the commits of other runs ready at the same moment; on SQLite
        it is written from the event loop while the database thread is idle."""
        if self._group is not None and self._group.accepts(commit):
            return await self._group.commit(run_id=run_id, owner=owner, commit=commit, now=now)
        if self._sqlite_loop is not None and self._sqlite_loop.accepts(commit):
            return await self._sqlite_loop.commit(run_id=run_id, owner=owner, commit=commit, now=now)
        return await self.run_sync(self.commit, run_id=run_id, owner=owner, commit=commit, now=now)

    def load_resume(self, run_id: str) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
        """PostgreSQL: the history and the unconsumed messages (up to RESUME_MESSAGES; None when
        there are more) in one round trip, both prepared statements sent in a pipeline."""
        if not (values.pg() and _pipelines()):
            return self.load_history(run_id), None
        rid = values.rid(run_id)
        with hot_cursor() as history_cursor, hot_cursor() as message_cursor:
            with connection.connection.pipeline():
                history_cursor.execute(HISTORY_READ, [rid])
                message_cursor.execute(RESUME_READ, [rid, RESUME_MESSAGES + 1])
            return _resumed(history_cursor.fetchall(), message_cursor.fetchall())

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
                self._prefetched[run.id] = _resumed(entries.get(run.id, []), unconsumed.get(run.id, []))
            else:
                self._prefetched.pop(run.id, None)

    async def aload_resume(self, run_id: str) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
        """What the claim read already (`_keep_prefetched`), else a read from the runner's event
        loop (`loop_reads`) unless a call is in flight there, else through the threads."""
        prefetched = self._prefetched.pop(run_id, None)
        if prefetched is not None:
            return prefetched
        if self._reads is not None and not self._reads.busy:
            rid = values.rid(run_id)
            rows = await self._reads.fetch([(HISTORY_READ, [rid]), (RESUME_READ, [rid, RESUME_MESSAGES + 1])])
            if rows is not None:
                return _resumed(*rows)
        return await self.run_sync(self.load_resume, run_id)

    def available_messages(self, run_id: str, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        """One prepared statement (one per number of queues): a resumed wait reads it."""
        statement = shared.select_available_messages(", ".join(MESSAGE_FIELDS), len(queues or ()))
        with hot_cursor() as cursor:
            cursor.execute(statement, [values.rid(run_id), *(queues or ()), limit])
            return [message_from_row(row) for row in cursor.fetchall()]

    # --- callers' side --------------------------------------------------------------------------

    def send(
        self, message: OutgoingMessage, *, now: dt.datetime, audit: Audit | None = None
    ) -> MessageRecord:
        if audit is None and message.run_id is not None and values.pg():
            return writes.send_to_run(message, now)  # one statement
        with transaction.atomic(), connection.cursor() as cursor:
            record = writes.insert_message(cursor, message, now)
            assert record is not None  # only a child's report to its parent is ever dropped
            notify.notify(cursor)
            if audit is not None:
                details = {"queue": message.queue, "message": record.id}
                write_audit(record.run_id, AuditAction.SEND, audit, details, now)
        return record

    def get_message(self, message_id: int) -> MessageRecord:
        return message_record(Message.objects.get(id=message_id))

    def request_cancel(self, run_id: str, *, now: dt.datetime) -> RunRecord:
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(id=run_id).first()
            if run is None:
                raise RunNotFound(f"no run with id {quoted(run_id)}")
            if run.status not in TERMINAL and not run.cancel_requested:
                run.cancel_requested = True
                fields = ["cancel_requested", *run.touch(now)]
                if run.status != RunStatus.RUNNING:  # a waiting run is woken to finish as cancelled
                    run.wake_at = now
                    fields.append("wake_at")
                run.save(update_fields=fields)
                notify.notify_now()
        return run_record(run)

    def acquire_limit(
        self, limiter: Limiter, *, holder: str, expires_at: dt.datetime, now: dt.datetime
    ) -> Grant:
        return limits.acquire(limiter, holder, expires_at, now)

    def release_limit(self, slot: int, *, tokens: int, now: dt.datetime) -> None:
        limits.release(slot, tokens, now)

    def limiter_use(self, names: list[str], *, now: dt.datetime) -> dict[str, dict[str, int]]:
        return limits.use(names, now)

    def list_events(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[EventRecord]:
        return events_after(run_id, after=after, limit=limit)

    async def watch(self, wake: Callable[[], None]) -> None:
        """PostgreSQL: LISTEN for the NOTIFY that every send and start issues on commit.
        SQLite: PRAGMA data_version moves when another connection commits (it reads no table);
        a runner writing its step commits from the loop asks the loop's connection (`sqlite_loop`)."""
        if self._sqlite_loop is not None and await self._sqlite_loop.connection() is not None:
            await notify.poll_data_version_in_loop(self._sqlite_loop.version, wake)
        else:
            await notify.watch(self.run_sync, wake)


_LOCAL_CLOCK = Clock()


@functools.cache
def _database_clock() -> AnchoredClock:
    """The process's reading of the database's time (any Django store reads it the same way)."""
    store = DjangoStore()
    return AnchoredClock(store.database_time, store.adatabase_time)


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
        if own_transaction and not lock and not park and _pipelines():
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


def _setting(name: str) -> bool:
    """`WORKFLOWS["GROUP_COMMIT"]` or `["ASYNC_COMMITS"]`, default True (read here:
    `workflows.conf` imports the store)."""
    return bool(getattr(settings, "WORKFLOWS", {}).get(name, True))


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


def _resumed(history: list[Any], messages: list[Any]) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
    """A resumed run's history and unconsumed messages from their rows (None: more than
    RESUME_MESSAGES, read when it waits)."""
    unconsumed = [message_from_row(row) for row in messages]
    return [entry_from_row(row) for row in history], (
        unconsumed if len(unconsumed) <= RESUME_MESSAGES else None
    )


def _connection_params() -> tuple[dict[str, Any], str | None]:
    """In a database thread: what Django would connect with, and the role it would assume."""
    return connection.get_connection_params(), connection.settings_dict["OPTIONS"].get("assume_role")


@functools.cache
def _pipelines() -> bool:
    """Whether psycopg's libpq can send a pipeline (libpq 14+; psycopg[binary] bundles one, a
    system libpq may be older): without, a resumed run reads its messages when it waits."""
    import psycopg

    return bool(psycopg.Pipeline.is_supported())


def _holdable(new: NewRun) -> NewRun:
    """A held run is created outside any concurrency group and without a first message (the
    caller never asks for either): what it does not write, its record must not claim."""
    if new.concurrency_group is None and new.first_message is None:
        return new
    return new.but(concurrency_group=None, first_message=None)
