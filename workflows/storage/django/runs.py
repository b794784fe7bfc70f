"""A Django store's runs: started, read, sent to, cancelled (`DjangoRuns`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from django.core.exceptions import ValidationError
from django.db import (
    IntegrityError,
    connection,
    transaction,
)

from ...core.exceptions import RunNotFound
from ...core.keys import key_identity, quoted
from ...core.limits import Grant, Limiter
from ...core.new_run import NewRun
from ...core.records import (
    TERMINAL,
    Audit,
    AuditAction,
    EventRecord,
    MessageRecord,
    OutgoingMessage,
    RunRecord,
    RunStatus,
)
from ...core.streams import ChunkRecord
from ...models import Message, Run
from ..methods import Statement
from . import limits, messages, notify, starts, values
from .paths import StorePaths
from .prepared import hot_cursor
from .repairs import RESUMED_FIELDS, resume_unpaused, write_audit
from .rows import (
    RUN_COLUMNS,
    chunks_after,
    events_after,
    message_record,
    run_from_row,
    run_record,
)
from .statements import shared

# The hot read's text, built once (not at every call).
RUN_READ = shared.SELECT_RUN.format(columns=", ".join(RUN_COLUMNS))
RUN_BY_KEY = shared.SELECT_RUN_BY_KEY.format(columns=", ".join(RUN_COLUMNS))


class DjangoRuns(StorePaths):
    """Runs started, read, sent to, cancelled; limiters and events."""

    def get_or_create_run(self, new: NewRun, together: Sequence[Statement] = ()) -> tuple[RunRecord, bool]:
        if together:  # the caller's statements first, in the run's transaction
            with transaction.atomic(), connection.cursor() as cursor:
                for sql, params in together:
                    cursor.execute(sql, params)
                return self.get_or_create_run(new)
        if values.pg():  # one statement creates it (and wakes runners) unless the key is taken
            created = starts.insert_run_if_new(new)
            if created is not None:
                return created, True
        existing = run_by_key(new.workflow, new.key)
        if existing is not None:
            return existing, False
        try:
            run = starts.start_run(new)
        except IntegrityError:  # created meanwhile by another caller with the same key
            created_meanwhile = run_by_key(new.workflow, new.key)
            assert created_meanwhile is not None  # runs are deleted only when finished and pruned
            return created_meanwhile, False
        return run_record(run), True

    def get_or_create_held_run(
        self, new: NewRun, *, owner: str, lease_seconds: float
    ) -> tuple[RunRecord, bool, bool]:
        """A new run leased to `owner`: on PostgreSQL one statement (`starts.held_run_statement`), on
        SQLite one transaction (`starts.create_held_run`); a key already taken answers its run,
        not held."""
        new = _holdable(new)
        statement = starts.held_run_statement(new, owner, new.now + dt.timedelta(seconds=lease_seconds))
        if values.pg():
            with hot_cursor() as cursor:
                cursor.execute(statement.sql, statement.params)
                created = cursor.fetchone() is not None
        else:
            created = starts.create_held_run(statement.record)
        if created:
            return statement.record, True, True
        run, created = self.get_or_create_run(new)
        return run, created, False

    async def aget_or_create_held_run(
        self, new: NewRun, *, owner: str, lease_seconds: float
    ) -> tuple[RunRecord, bool, bool]:
        """The connector's way (`read`: a runner's on PostgreSQL, from its event loop), else through
        the threads (see `DjangoClaims.aclaim` for when)."""
        if self.connector.reads_here:
            new = _holdable(new)
            statement = starts.held_run_statement(new, owner, new.now + dt.timedelta(seconds=lease_seconds))
            rows = await self.connector.read([(statement.sql, statement.params)])
            if rows is not None:
                if rows[0]:
                    return statement.record, True, True
                run, created = await self.run_sync(self.get_or_create_run, new)  # the key is taken
                return run, created, False
        return await self.run_sync(self.get_or_create_held_run, new, owner=owner, lease_seconds=lease_seconds)

    async def aget_or_create_run(
        self, new: NewRun, together: Sequence[Statement] = ()
    ) -> tuple[RunRecord, bool]:
        """A runner's store (a run started by a workflow's code, `Runner.start`) and a web
        process's (`DjangoThreadLoop`) create the connector's way (`read`: `together` and the run
        in one round trip, one transaction); a taken key goes through the threads, which read its
        run (`together` was written then), and so does a refused statement, which raises there."""
        if self.connector.reads_here:
            statement = starts.new_run_statement(new)
            rows = await self.connector.read([*together, (statement.sql, statement.params)])
            if rows is not None:
                if rows[-1]:
                    return statement.record, True
                return await self.run_sync(self.get_or_create_run, new)
        return await self.run_sync(self.get_or_create_run, new, together)

    async def aget_run(self, run_id: str) -> RunRecord:
        """The connector's way (`read`), else through the threads."""
        if self.connector.reads_here:
            try:
                rid = values.rid(run_id)
            except (ValidationError, ValueError, TypeError):  # not a UUID
                raise RunNotFound(f"no run with id {quoted(run_id)}") from None
            rows = await self.connector.read([(RUN_READ, [rid])])
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

    async def afind_run(self, workflow: str, key: list[str]) -> RunRecord:
        """The connector's way (`read`: `GET /jobs/{id}` in a web process), else the threads."""
        if self.connector.reads_here:
            rows = await self.connector.read([(RUN_BY_KEY, [workflow, key_identity(key)[1]])])
            if rows is not None:
                if not rows[0]:
                    raise RunNotFound(f"no {workflow} run with key {quoted(key)}")
                return run_from_row(rows[0][0])
        return await self.run_sync(self.find_run, workflow, key)

    def find_run(self, workflow: str, key: list[str]) -> RunRecord:
        run = run_by_key(workflow, key)
        if run is None:
            raise RunNotFound(f"no {workflow} run with key {quoted(key)}")
        return run

    def send(
        self, message: OutgoingMessage, *, now: dt.datetime, audit: Audit | None = None
    ) -> MessageRecord:
        if audit is None and message.run_id is not None and values.pg():
            return messages.send_to_run(message, now)  # one statement
        with transaction.atomic(), connection.cursor() as cursor:
            record = messages.insert_message(cursor, message, now)
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
                if run.status == RunStatus.PAUSED:  # woken too: a paused run ends cancelled at once
                    resume_unpaused(run, now)
                    fields += RESUMED_FIELDS
                elif run.status != RunStatus.RUNNING:  # a waiting run is woken to finish as cancelled
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

    def list_chunks(
        self, run_id: str, stream: str | None, *, after: int = 0, limit: int = 1000
    ) -> list[ChunkRecord]:
        return chunks_after(run_id, stream, after=after, limit=limit)


def _holdable(new: NewRun) -> NewRun:
    """A held run is created outside any concurrency group and without a first message (the
    caller never asks for either): what it does not write, its record must not claim."""
    if new.concurrency_group is None and new.first_message is None:
        return new
    return new.but(concurrency_group=None, first_message=None)


def run_by_key(workflow: str, key: list[str]) -> RunRecord | None:
    """The workflow's run of `key`, by one named statement: every start (`POST /jobs` on SQLite)
    asks it, and the ORM's query building cost more CPU than the rest of the start."""
    with hot_cursor() as cursor:
        cursor.execute(RUN_BY_KEY, [workflow, key_identity(key)[1]])
        row = cursor.fetchone()
    return None if row is None else run_from_row(row)
