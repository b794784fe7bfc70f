"""The real store: the engine's writes as SQL over Django's connection, SQLite and PostgreSQL.

The hot path (commit, claim, heartbeat) is plain SQL so that a recorded step costs a handful of
statements in one transaction; reads use the ORM. Methods run in Django's database thread when
called through their `a`-prefixed twins.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.db import IntegrityError, InterfaceError, OperationalError, connection, transaction

from ...core.exceptions import LeaseLost, RunFinished, RunNotFound
from ...core.keys import key_identity
from ...core.records import (
    LIVE,
    TERMINAL,
    Commit,
    CommitResult,
    EntryRecord,
    EventRecord,
    MessageRecord,
    OutgoingMessage,
    RunRecord,
    RunStatus,
)
from ...models import Entry, Event, Message, Run
from ..base import Store
from .rows import ENTRY_FIELDS, RUN_COLUMNS, event_record, message_record, run_from_row, run_record

logger = logging.getLogger(__name__)

NOTIFY_CHANNEL = "workflows_wake"
SQLITE_POLL = 0.01  # seconds between data_version checks: an in-process call, no table read
LISTEN_RETRY = 1.0  # seconds before reconnecting a dropped LISTEN connection


class DjangoStore(Store):
    """With no `db_threads` its calls run in Django's sync thread (`sync_to_async`), sharing the
    caller's connection and transaction, as tests and views need. A runner gives it a pool of
    database threads instead (one connection each): runs then wait on the database in parallel,
    and a call costs a plain executor hop. SQLite always gets one thread: it has one writer, and
    its change check (data_version) must ask the connection that writes."""

    def __init__(self, db_threads: int | None = None) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._threads = 0
        if db_threads is not None:
            self._threads = 1 if connection.vendor == "sqlite" else max(1, db_threads)
            self._executor = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="workflows-db")

    async def run_sync(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self._executor is None:
            return await sync_to_async(_reconnecting(fn), thread_sensitive=True)(*args, **kwargs)
        call = functools.partial(_reconnecting(fn), *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        """Close the pool's connections and threads (a stopping runner)."""
        if self._executor is not None:
            from django.db import connections

            barrier = threading.Barrier(self._threads)

            def close_this_threads_connection() -> None:
                barrier.wait(timeout=10)  # one task per thread: every thread closes its own
                connections.close_all()

            for _ in range(self._threads):
                self._executor.submit(close_this_threads_connection)
            self._executor.shutdown(wait=True)

    # --- value adapters -------------------------------------------------------------------------

    @staticmethod
    def _pg() -> bool:
        return connection.vendor == "postgresql"

    @staticmethod
    def _t(value: dt.datetime | None) -> Any:
        return connection.ops.adapt_datetimefield_value(value)

    @staticmethod
    def _j(value: Any) -> Any:
        return None if value is None else connection.ops.adapt_json_value(value, None)

    @staticmethod
    def _id(run_id: str) -> Any:
        return Run._meta.pk.get_db_prep_value(run_id, connection)

    def _notify(self, cursor: Any) -> None:
        if self._pg():
            cursor.execute("SELECT pg_notify(%s, '')", [NOTIFY_CHANNEL])

    # --- runs -----------------------------------------------------------------------------------

    def get_or_create_run(
        self, *, workflow: str, key: list[str], version: str, initial_state: dict[str, Any], now: dt.datetime
    ) -> tuple[RunRecord, bool]:
        key_text, key_hash = key_identity(key)
        existing = Run.objects.filter(workflow=workflow, key_hash=key_hash).first()
        if existing is not None:
            return run_record(existing), False
        try:
            with transaction.atomic():
                run = self._create_run(workflow, key, key_text, key_hash, version, initial_state, now)
                with connection.cursor() as cursor:
                    self._notify(cursor)
        except IntegrityError:  # created meanwhile by another caller with the same key
            return run_record(Run.objects.get(workflow=workflow, key_hash=key_hash)), False
        return run_record(run), True

    @staticmethod
    def _create_run(
        workflow: str,
        key: list[str],
        key_text: str,
        key_hash: str,
        version: str,
        initial_state: dict[str, Any],
        now: dt.datetime,
    ) -> Run:
        return Run.objects.create(
            workflow=workflow,
            key=key,
            key_text=key_text,
            key_hash=key_hash,
            version=version,
            status=Run.Status.PENDING,
            state=initial_state,
            created_at=now,
            updated_at=now,
            wake_at=now,
        )

    def get_run(self, run_id: str) -> RunRecord:
        try:
            return run_record(Run.objects.get(id=run_id))
        except (Run.DoesNotExist, ValidationError, ValueError, TypeError):  # missing, or not a UUID
            raise RunNotFound(f"no run with id {run_id!r}") from None

    def find_run(self, workflow: str, key: list[str]) -> RunRecord:
        _text, key_hash = key_identity(key)
        run = Run.objects.filter(workflow=workflow, key_hash=key_hash).first()
        if run is None:
            raise RunNotFound(f"no {workflow} run with key {key!r}")
        return run_record(run)

    # --- the runner's side ----------------------------------------------------------------------

    def claim(
        self, *, owner: str, workflows: list[str], limit: int, lease_seconds: float, now: dt.datetime
    ) -> list[RunRecord]:
        """One statement: pick due runs (SKIP LOCKED on PostgreSQL), lease them, return them whole,
        each marked `fresh` when it never ran before (no history to load)."""
        if not workflows:
            return []
        lease_until = now + dt.timedelta(seconds=lease_seconds)
        names = ", ".join(["%s"] * len(workflows))
        t = self._t
        due = (
            f"SELECT id AS claim_id, started_at AS was_started FROM workflows_run WHERE wake_at <= %s"
            f" AND status IN (%s, %s, %s) AND workflow IN ({names}) ORDER BY wake_at LIMIT %s"
        )
        due_params = [t(now), *LIVE, *workflows, limit]
        lease = (
            "UPDATE workflows_run SET status = %s, lease_owner = %s, wake_at = %s, updated_at = %s,"
            " started_at = COALESCE(workflows_run.started_at, %s)"
        )
        lease_params = [RunStatus.RUNNING, owner, t(lease_until), t(now), t(now)]
        columns = ", ".join("workflows_run." + c for c in RUN_COLUMNS)
        with transaction.atomic(), connection.cursor() as cursor:
            if self._pg():
                cursor.execute(
                    f"{lease} FROM ({due} FOR UPDATE SKIP LOCKED) AS claimed"
                    f" WHERE workflows_run.id = claimed.claim_id RETURNING {columns}, claimed.was_started",
                    lease_params + due_params,
                )
                rows = cursor.fetchall()
            else:  # SQLite: the IMMEDIATE transaction already excludes other writers
                cursor.execute(due, due_params)
                was_started = {str(uuid.UUID(str(rid))): started for rid, started in cursor.fetchall()}
                if not was_started:
                    return []
                marks = ", ".join(["%s"] * len(was_started))
                cursor.execute(
                    f"{lease} WHERE id IN ({marks}) RETURNING {columns}",
                    lease_params + [self._id(rid) for rid in was_started],
                )
                rows = [(*row, was_started[str(uuid.UUID(str(row[0])))]) for row in cursor.fetchall()]
        runs = [run_from_row(row[:-1], fresh=row[-1] is None) for row in rows]
        return sorted(runs, key=lambda r: r.wake_at or now)

    def next_wake_at(self, *, owner: str, workflows: list[str]) -> dt.datetime | None:
        return (
            Run.objects.filter(wake_at__isnull=False, status__in=LIVE, workflow__in=workflows)
            .exclude(status=RunStatus.RUNNING, lease_owner=owner)
            .order_by("wake_at")
            .values_list("wake_at", flat=True)
            .first()
        )

    def heartbeat(
        self, *, owner: str, run_ids: list[str], lease_seconds: float, now: dt.datetime
    ) -> dict[str, bool]:
        if not run_ids:
            return {}
        lease_until = now + dt.timedelta(seconds=lease_seconds)
        marks = ", ".join(["%s"] * len(run_ids))
        with connection.cursor() as cursor:
            cursor.execute(
                f"UPDATE workflows_run SET wake_at = %s WHERE lease_owner = %s AND status = %s"
                f" AND id IN ({marks}) RETURNING id, cancel_requested",
                [self._t(lease_until), owner, RunStatus.RUNNING, *[self._id(r) for r in run_ids]],
            )
            rows = cursor.fetchall()
        return {str(Run._meta.pk.to_python(row[0])): bool(row[1]) for row in rows}

    def release(self, *, owner: str, run_ids: list[str], now: dt.datetime) -> None:
        if not run_ids:
            return
        with transaction.atomic():
            Run.objects.filter(id__in=run_ids, lease_owner=owner, status=RunStatus.RUNNING).update(
                status=RunStatus.PENDING, lease_owner="", wake_at=now, updated_at=now
            )
            with connection.cursor() as cursor:
                self._notify(cursor)  # another runner takes them at once

    def load_history(self, run_id: str) -> list[EntryRecord]:
        rows = Entry.objects.filter(run_id=run_id, superseded=False).order_by("scope", "position")
        return [EntryRecord(**row) for row in rows.values(*ENTRY_FIELDS)]

    def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        if self._pg() and _fits_one_statement(commit):
            return self._commit_one_statement(run_id, owner, commit, now)
        t, j = self._t, self._j
        rid = self._id(run_id)
        with transaction.atomic(), connection.cursor() as cursor:
            # The fence: only the lease holder writes. It also locks the run row first, so a sender
            # racing with a suspension either lands before it (and is seen) or wakes it after.
            sets, params = self._run_update(commit, now)
            transition = commit.transition
            cursor.execute(
                f"UPDATE workflows_run SET {', '.join(sets)} WHERE id = %s AND lease_owner = %s"
                " AND status = %s RETURNING cancel_requested",
                [*params, rid, owner, RunStatus.RUNNING],
            )
            fenced = cursor.fetchone()
            if fenced is None:
                raise LeaseLost(f"run {run_id} is no longer held by {owner}")

            # A message taken by a wait that does not answer it is completed (with no response)
            # by the same UPDATE that consumes it.
            auto_completed = {mid for mid, response in commit.complete if response is None}
            entry_ids = [
                self._write_entry(cursor, rid, write, attempt, now, auto_completed)
                for write, attempt in commit.entries
            ]

            for scope in commit.prune:
                self._prune(cursor, rid, scope)
            if commit.events:
                values = ", ".join(["(%s, %s, %s, %s)"] * len(commit.events))
                flat: list[Any] = []
                for name, payload in commit.events:
                    flat += [rid, name, j(payload), t(now)]
                cursor.execute(
                    f"INSERT INTO workflows_event (run_id, name, payload, created_at) VALUES {values}", flat
                )
            consumed = {mid for write, _attempt in commit.entries for mid in write.consumes}
            for message_id, response in commit.complete:
                if message_id in consumed and message_id in auto_completed:
                    continue
                cursor.execute(
                    "UPDATE workflows_message SET response = %s, completed_at = %s"
                    " WHERE id = %s AND completed_at IS NULL",
                    [j(response), t(now), message_id],
                )
            for outgoing in commit.messages:
                self._insert_message(cursor, outgoing, now)
            if commit.messages:
                self._notify(cursor)
            if transition is not None and transition.status == RunStatus.WAITING:
                self._wake_if_message_waiting(cursor, rid, transition.wait_queues, now)
        return CommitResult(entry_ids=entry_ids, cancel_requested=bool(fenced[0]))

    def _run_update(self, commit: Commit, now: dt.datetime) -> tuple[list[str], list[Any]]:
        """The SET clause of the fenced run update: timestamps, state and the transition."""
        t, j = self._t, self._j
        sets, params = ["updated_at = %s"], [t(now)]
        if commit.state is not None:
            sets.append("state = %s")
            params.append(j(commit.state))
        transition = commit.transition
        if transition is not None:
            sets.append("status = %s")
            params.append(transition.status)
            if transition.status in TERMINAL:
                sets += [
                    "wake_at = NULL",
                    "lease_owner = ''",
                    "finished_at = %s",
                    "result = %s",
                    "error = %s",
                ]
                params += [t(now), j(transition.result), j(transition.error)]
            else:  # waiting, or released (pending)
                sets += ["wake_at = %s", "lease_owner = ''"]
                params.append(t(transition.wake_at))
        return sets, params

    def _commit_one_statement(
        self, run_id: str, owner: str, commit: Commit, now: dt.datetime
    ) -> CommitResult:
        """PostgreSQL: the common commit (a step's record, its attempt, state, events, a transition)
        as one statement of data-modifying CTEs: one round trip, atomic on its own. Every write
        hangs off the fenced run update, so a lost lease writes nothing."""
        t, j = self._t, self._j
        rid = self._id(run_id)
        sets, params = self._run_update(commit, now)
        fence = "id = %s AND lease_owner = %s AND status = %s"
        params += [rid, owner, RunStatus.RUNNING]
        updated = commit.entries[0][0].id if commit.entries else None
        if updated is not None:  # the entry to update must still be current, or nothing is written
            fence += " AND EXISTS (SELECT 1 FROM workflows_entry WHERE id = %s AND superseded = false)"
            params.append(updated)
        ctes = [f"r AS (UPDATE workflows_run SET {', '.join(sets)} WHERE {fence} RETURNING cancel_requested)"]
        entry_select = "NULL::bigint"
        if commit.entries:
            [(write, attempt)] = commit.entries
            if write.id is None:
                ctes.append(
                    "e AS (INSERT INTO workflows_entry (run_id, scope, position, name, kind, status, input,"
                    " output, error, meta, attempts, started_at, finished_at, wake_at, superseded)"
                    " SELECT %s, %s, %s, %s, %s, %s, %s::jsonb, %s::jsonb, %s::jsonb, %s::jsonb, %s,"
                    " %s::timestamptz, %s::timestamptz, %s::timestamptz, false FROM r RETURNING id)"
                )
                params += [rid, write.scope, write.position, write.name, write.kind, write.status, j(write.input),
                           j(write.output), j(write.error), j(write.meta), write.attempts, t(write.started_at),
                           t(write.finished_at), t(write.wake_at)]  # fmt: skip
            else:
                ctes.append(
                    "e AS (UPDATE workflows_entry SET status = %s, input = %s::jsonb, output = %s::jsonb,"
                    " error = %s::jsonb, meta = %s::jsonb, attempts = %s, finished_at = %s::timestamptz,"
                    " wake_at = %s::timestamptz WHERE id = %s AND EXISTS (SELECT 1 FROM r) RETURNING id)"
                )
                params += [write.status, j(write.input), j(write.output), j(write.error), j(write.meta),
                           write.attempts, t(write.finished_at), t(write.wake_at), write.id]  # fmt: skip
            entry_select = "(SELECT id FROM e)"
            if attempt is not None:
                ctes.append(
                    "a AS (INSERT INTO workflows_attempt (entry_id, number, started_at, finished_at, outcome,"
                    " error, delay, retry_at) SELECT e.id, %s, %s::timestamptz, %s::timestamptz, %s, %s::jsonb,"
                    " %s::float8, %s::timestamptz FROM e RETURNING id)"
                )
                params += [attempt.number, t(attempt.started_at), t(attempt.finished_at), attempt.outcome,
                           j(attempt.error), attempt.delay, t(attempt.retry_at)]  # fmt: skip
        if commit.events:
            rows = ", ".join(["(%s, %s::jsonb)"] * len(commit.events))
            ctes.append(
                "v AS (INSERT INTO workflows_event (run_id, name, payload, created_at)"
                f" SELECT %s, x.name, x.payload, %s::timestamptz FROM (VALUES {rows}) AS x(name, payload)"
                " WHERE EXISTS (SELECT 1 FROM r) RETURNING id)"
            )
            params += [rid, t(now)]
            for name, payload in commit.events:
                params += [name, j(payload)]
        with connection.cursor() as cursor:
            cursor.execute(
                f"WITH {', '.join(ctes)} SELECT (SELECT cancel_requested FROM r), {entry_select}", params
            )
            cancel_requested, entry_id = cursor.fetchone()
        if cancel_requested is None:
            raise LeaseLost(f"run {run_id} is no longer held by {owner}, or its entry was replayed")
        return CommitResult(
            entry_ids=[entry_id] if commit.entries else [], cancel_requested=bool(cancel_requested)
        )

    def _write_entry(
        self, cursor: Any, rid: Any, write: Any, attempt: Any, now: dt.datetime, auto_completed: set[int]
    ) -> int:
        t, j = self._t, self._j
        if write.id is None:
            cursor.execute(
                "INSERT INTO workflows_entry (run_id, scope, position, name, kind, status, input, output,"
                " error, meta, attempts, started_at, finished_at, wake_at, superseded)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id",
                [rid, write.scope, write.position, write.name, write.kind, write.status, j(write.input),
                 j(write.output), j(write.error), j(write.meta), write.attempts, t(write.started_at),
                 t(write.finished_at), t(write.wake_at), False],
            )  # fmt: skip
            entry_id = cursor.fetchone()[0]
        else:
            entry_id = write.id
            cursor.execute(
                "UPDATE workflows_entry SET status = %s, input = %s, output = %s, error = %s, meta = %s,"
                " attempts = %s, finished_at = %s, wake_at = %s WHERE id = %s AND superseded = %s",
                [write.status, j(write.input), j(write.output), j(write.error), j(write.meta), write.attempts,
                 t(write.finished_at), t(write.wake_at), entry_id, False],
            )  # fmt: skip
            if cursor.rowcount != 1:
                raise LeaseLost(f"entry {entry_id} was replaced (an operator replayed the run)")
        if attempt is not None:
            cursor.execute(
                "INSERT INTO workflows_attempt (entry_id, number, started_at, finished_at, outcome, error,"
                " delay, retry_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [entry_id, attempt.number, t(attempt.started_at), t(attempt.finished_at), attempt.outcome,
                 j(attempt.error), attempt.delay, t(attempt.retry_at)],
            )  # fmt: skip
        if write.consumes:
            marks = ", ".join(["%s"] * len(write.consumes))
            complete = set(write.consumes) <= auto_completed
            cursor.execute(
                "UPDATE workflows_message SET consumed_at = %s, consumed_by_id = %s"
                + (", completed_at = COALESCE(completed_at, %s)" if complete else "")
                + f" WHERE run_id = %s AND consumed_at IS NULL AND id IN ({marks})",
                [t(now), entry_id, *([t(now)] if complete else []), rid, *write.consumes],
            )
            if cursor.rowcount != len(write.consumes):
                raise LeaseLost("a message was consumed by someone else")
        return entry_id

    def _prune(self, cursor: Any, rid: Any, scope: str) -> None:
        """Delete a scope and the scopes under it (an old loop iteration), attempts first."""
        prefix = scope + "/"
        where = "run_id = %s AND (scope = %s OR substr(scope, 1, %s) = %s)"
        params = [rid, scope, len(prefix), prefix]
        entries = f"SELECT id FROM workflows_entry WHERE {where}"
        cursor.execute(f"DELETE FROM workflows_attempt WHERE entry_id IN ({entries})", params)
        cursor.execute(
            f"UPDATE workflows_message SET consumed_by_id = NULL WHERE consumed_by_id IN ({entries})", params
        )
        cursor.execute(f"DELETE FROM workflows_entry WHERE {where}", params)

    def _wake_if_message_waiting(
        self, cursor: Any, rid: Any, queues: tuple[str, ...] | None, now: dt.datetime
    ) -> None:
        if queues is None:
            return
        sql = "SELECT 1 FROM workflows_message WHERE run_id = %s AND consumed_at IS NULL"
        params: list[Any] = [rid]
        if queues:
            sql += f" AND queue IN ({', '.join(['%s'] * len(queues))})"
            params += list(queues)
        cursor.execute(sql + " LIMIT 1", params)
        if cursor.fetchone() is not None:
            cursor.execute("UPDATE workflows_run SET wake_at = %s WHERE id = %s", [self._t(now), rid])

    def _insert_message(self, cursor: Any, outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord:
        """Store a message and wake its run; the caller holds a transaction."""
        if outgoing.run_id is not None:
            target = Run.objects.filter(id=outgoing.run_id).values_list("id", "status").first()
            if target is None:
                raise RunNotFound(f"no run with id {outgoing.run_id!r}")
            run_pk, status = target
        else:
            assert outgoing.workflow is not None and outgoing.key is not None
            key_text, key_hash = key_identity(outgoing.key)
            found = Run.objects.filter(workflow=outgoing.workflow, key_hash=key_hash).values_list(
                "id", "status"
            )
            target = found.first()
            if target is None:
                with transaction.atomic():  # a savepoint: a concurrent creator wins, then we read it
                    try:
                        run = self._create_run(
                            outgoing.workflow, outgoing.key, key_text, key_hash, outgoing.version,
                            outgoing.initial_state or {}, now,
                        )  # fmt: skip
                        target = (run.id, run.status)
                    except IntegrityError:
                        target = None
                if target is None:
                    target = found.first()
            run_pk, status = target
        if status in TERMINAL:
            raise RunFinished(f"run {run_pk} is {status}; it takes no more messages")
        rid = self._id(str(run_pk))
        # Lock the target row (even when no wake is due) so a suspension racing with us sees this message.
        cursor.execute(
            "UPDATE workflows_run SET wake_at = CASE WHEN status IN (%s, %s) THEN %s ELSE wake_at END"
            " WHERE id = %s AND status IN (%s, %s, %s)",
            [RunStatus.PENDING, RunStatus.WAITING, self._t(now), rid, *LIVE],
        )
        if cursor.rowcount != 1:
            raise RunFinished(f"run {run_pk} finished; it takes no more messages")
        cursor.execute(
            "INSERT INTO workflows_message (run_id, queue, body, sent_at) VALUES (%s, %s, %s, %s) RETURNING id",
            [rid, outgoing.queue, self._j(outgoing.body), self._t(now)],
        )
        return MessageRecord(
            id=cursor.fetchone()[0], run_id=str(run_pk), queue=outgoing.queue, body=outgoing.body, sent_at=now
        )

    def available_messages(self, run_id: str, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        rows = Message.objects.filter(run_id=run_id, consumed_at__isnull=True)
        if queues:
            rows = rows.filter(queue__in=queues)
        return [message_record(m) for m in rows.order_by("id")[:limit]]

    # --- callers' side --------------------------------------------------------------------------

    def send(self, message: OutgoingMessage, *, now: dt.datetime) -> MessageRecord:
        with transaction.atomic(), connection.cursor() as cursor:
            record = self._insert_message(cursor, message, now)
            self._notify(cursor)
        return record

    def get_message(self, message_id: int) -> MessageRecord:
        return message_record(Message.objects.get(id=message_id))

    def request_cancel(self, run_id: str, *, now: dt.datetime) -> RunRecord:
        with transaction.atomic():
            run = Run.objects.select_for_update().filter(id=run_id).first()
            if run is None:
                raise RunNotFound(f"no run with id {run_id!r}")
            if run.status not in TERMINAL and not run.cancel_requested:
                run.cancel_requested = True
                fields = ["cancel_requested", "updated_at"]
                if run.status != RunStatus.RUNNING:  # a waiting run is woken to finish as cancelled
                    run.wake_at = now
                    fields.append("wake_at")
                run.updated_at = now
                run.save(update_fields=fields)
                with connection.cursor() as cursor:
                    self._notify(cursor)
        return run_record(run)

    def list_events(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[EventRecord]:
        rows = Event.objects.filter(run_id=run_id, id__gt=after).order_by("id")[:limit]
        return [event_record(e) for e in rows]

    async def watch(self, wake: Callable[[], None]) -> None:
        """PostgreSQL: LISTEN for the NOTIFY that every send and start issues on commit.
        SQLite: PRAGMA data_version moves when another connection commits (it reads no table)."""
        if await self.run_sync(self._pg):
            await self._listen(wake)
        else:
            await self._poll_data_version(wake)

    async def _listen(self, wake: Callable[[], None]) -> None:
        import psycopg

        params = await self.run_sync(_libpq_params)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    wake()  # catch up with anything sent while we were not listening
                    async for _notify in conn.notifies():
                        wake()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("LISTEN connection failed; retrying in %.0fs", LISTEN_RETRY)
                await asyncio.sleep(LISTEN_RETRY)

    async def _poll_data_version(self, wake: Callable[[], None]) -> None:
        last = await self.run_sync(_sqlite_data_version)
        while True:
            await asyncio.sleep(SQLITE_POLL)
            version = await self.run_sync(_sqlite_data_version)
            if version != last:
                last = version
                wake()


def _fits_one_statement(commit: Commit) -> bool:
    """The commits the one-statement path handles: at most one entry and its attempt, state,
    events and a transition that needs no message check."""
    if commit.messages or commit.complete or commit.prune or len(commit.entries) > 1:
        return False
    if commit.entries and commit.entries[0][0].consumes:
        return False
    transition = commit.transition
    return transition is None or transition.status != RunStatus.WAITING or transition.wait_queues is None


def _reconnecting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A runner keeps one connection for its life: after a connection error, drop it so the next
    call reconnects (the failed call itself raises; the engine's lease logic retries the run)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError):
            if connection.in_atomic_block is False:
                connection.close()
            raise

    return call


def _sqlite_data_version() -> int:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA data_version")
        return cursor.fetchone()[0]


def _libpq_params() -> dict[str, Any]:
    settings = connection.settings_dict
    params: dict[str, Any] = {"dbname": settings["NAME"]}
    for libpq, django in (("user", "USER"), ("password", "PASSWORD"), ("host", "HOST"), ("port", "PORT")):
        if settings.get(django):
            params[libpq] = settings[django]
    for option, value in (settings.get("OPTIONS") or {}).items():
        if option in {"sslmode", "sslrootcert", "sslcert", "sslkey", "connect_timeout", "options"}:
            params[option] = value
    return params
