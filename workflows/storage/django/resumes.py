"""A Django store's resumed runs: history, messages and commits (`DjangoResumes`)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import (
    connection,
    transaction,
)

from ...core.exceptions import LeaseLost
from ...core.records import (
    Commit,
    CommitResult,
    EntryRecord,
    MessageRecord,
    RunStatus,
)
from ...models import Run
from . import paths, values, writes
from .paths import StorePaths
from .prepared import hot_cursor
from .reconnect import retrying_lost_races
from .rows import (
    ENTRY_FIELDS,
    MESSAGE_FIELDS,
    entry_from_row,
    message_from_row,
)
from .statements import shared

# Unconsumed messages read with a resumed run's history; a run with more reads them when it waits.
RESUME_MESSAGES = 100
HISTORY_READ = shared.SELECT_HISTORY.format(columns=", ".join(ENTRY_FIELDS))
RESUME_READ = shared.select_available_messages(", ".join(MESSAGE_FIELDS), 0)  # a resumed run's messages


class DjangoResumes(StorePaths):
    """A run resumed: its cut attempts recovered, its history and messages read, its commits."""

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
        """The connector's way: a runner's on PostgreSQL sends it from the event loop, where it may
        share one statement with other runs' commits; on SQLite it is written from the event loop
        while the database thread is idle; else through the threads."""
        return await self.connector.commit(run_id=run_id, owner=owner, commit=commit, now=now)

    def load_resume(self, run_id: str) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
        """PostgreSQL: the history and the unconsumed messages (up to RESUME_MESSAGES; None when
        there are more) in one round trip, both prepared statements sent in a pipeline."""
        if not (values.pg() and paths.pipelines()):
            return self.load_history(run_id), None
        rid = values.rid(run_id)
        with hot_cursor() as history_cursor, hot_cursor() as message_cursor:
            with connection.connection.pipeline():
                history_cursor.execute(HISTORY_READ, [rid])
                message_cursor.execute(RESUME_READ, [rid, RESUME_MESSAGES + 1])
            return resumed(history_cursor.fetchall(), message_cursor.fetchall())

    async def aload_resume(self, run_id: str) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
        """What the claim read already (`_keep_prefetched`), else the connector's way (`read`: a
        runner's on PostgreSQL, from its event loop), else through the threads."""
        prefetched = self._prefetched.pop(run_id, None)
        if prefetched is not None:
            return prefetched
        if self.connector.reads_here:
            rid = values.rid(run_id)
            rows = await self.connector.read(
                [(HISTORY_READ, [rid]), (RESUME_READ, [rid, RESUME_MESSAGES + 1])]
            )
            if rows is not None:
                return resumed(*rows)
        return await self.run_sync(self.load_resume, run_id)

    def available_messages(self, run_id: str, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        """One prepared statement (one per number of queues): a resumed wait reads it."""
        statement = shared.select_available_messages(", ".join(MESSAGE_FIELDS), len(queues or ()))
        with hot_cursor() as cursor:
            cursor.execute(statement, [values.rid(run_id), *(queues or ()), limit])
            return [message_from_row(row) for row in cursor.fetchall()]


def resumed(history: list[Any], messages: list[Any]) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
    """A resumed run's history and unconsumed messages from their rows (None: more than
    RESUME_MESSAGES, read when it waits)."""
    unconsumed = [message_from_row(row) for row in messages]
    return [entry_from_row(row) for row in history], (
        unconsumed if len(unconsumed) <= RESUME_MESSAGES else None
    )
