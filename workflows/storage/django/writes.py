"""A commit of the engine as SQL: everything in one transaction behind the run's fence.

Two ways to send it, one set of statements (`statements`): PostgreSQL sends the common commit (one
entry and its attempt, state, events, a transition) as ONE statement of data-modifying CTEs that
all hang off the fenced run update, so a lost lease writes nothing; every other commit, and every
commit on SQLite, runs the same statements one by one inside `transaction.atomic()`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import connection, transaction

from ...core.exceptions import LeaseLost
from ...core.records import (
    LOST_EVENTS,
    Commit,
    CommitResult,
    EntryKind,
    EntryStatus,
    Outcome,
    RunStatus,
    lost_attempt_error,
    lost_events_payload,
)
from ...core.streams import StreamChunk
from ...models import Attempt, Entry, Run
from . import statements, values
from .commit_statement import commit_one_statement, fits_one_statement
from .messages import insert_message
from .notify import notify
from .plain_commits import stored_attempt
from .prepared import hot_cursor
from .starts import start_child
from .statements import shared
from .transactions import run_body


def commit(run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
    on_pg = values.pg()
    if on_pg and fits_one_statement(commit):
        return commit_one_statement(run_id, owner, commit, now)
    return _commit_statements(run_id, owner, commit, now, on_pg)


def _commit_statements(
    run_id: str, owner: str, commit: Commit, now: dt.datetime, on_pg: bool
) -> CommitResult:
    with transaction.atomic(), hot_cursor() as cursor:
        return write_commit(cursor, run_id, owner, commit, now, on_pg)


def write_commit(
    cursor: Any, run_id: str, owner: str, commit: Commit, now: dt.datetime, on_pg: bool
) -> CommitResult:
    """A commit as statements on `cursor`, inside the caller's transaction: Django's, or on SQLite
    the runner's loop connection (`sqlite_loop`), which takes only commits with no messages and no
    child starts (they go through the ORM, on Django's connection)."""
    rid = values.rid(run_id)
    # The fence first: it also locks the run row, so a sender racing with a suspension either
    # lands before it (and is seen) or wakes it after.
    sets, params = shared.run_update(commit, now, on_pg)
    where, fence_params = shared.fence(rid, owner, commit)
    cursor.execute(shared.FENCED_RUN_UPDATE.format(sets=sets, where=where), params + fence_params)
    fenced = cursor.fetchone()
    if fenced is None:
        raise LeaseLost(f"run {run_id} is no longer held by {owner}, or its entry was replayed")
    if commit.in_transaction is not None:  # a transaction step: its writes, in this transaction
        # Only on Django's connection (the thread path): the loop paths never take such a commit.
        run_body(commit.in_transaction)

    # A message taken by a wait that does not answer it is completed (with no response)
    # by the same UPDATE that consumes it.
    auto_completed = {mid for mid, response in commit.complete if response is None}
    entry_ids = []
    for write, attempt in commit.entries:
        statement, entry_params = (
            shared.insert_entry(rid, write, on_pg) if write.id is None else shared.update_entry(write, on_pg)
        )
        cursor.execute(statement, entry_params)
        row = cursor.fetchone()
        if row is None:  # an update of an entry an operator's replay has just superseded
            raise LeaseLost(f"entry {write.id} of run {run_id} was replaced (an operator replayed it)")
        entry_id = row[0]
        entry_ids.append(entry_id)
        attempt = stored_attempt(write, attempt)
        if attempt is not None:
            cursor.execute(*shared.insert_attempt(attempt, entry_id, on_pg))
        if write.consumes:
            _consume(cursor, rid, entry_id, write.consumes, auto_completed, now)
    for scope in commit.prune:
        for statement in (shared.PRUNE_ATTEMPTS, shared.PRUNE_CONSUMERS, shared.PRUNE_ENTRIES):
            cursor.execute(statement, shared.scope_params(run_id, scope))
    insert_events(cursor, rid, shared.event_rows(commit), now)
    insert_chunks(cursor, rid, commit.stream_chunks, now)
    consumed = {mid for write, _attempt in commit.entries for mid in write.consumes}
    for message_id, response in commit.complete:
        if message_id in consumed and message_id in auto_completed:
            continue
        cursor.execute(shared.COMPLETE_MESSAGE, [values.j(response), values.t(now), message_id])
    for outgoing in commit.messages:
        insert_message(cursor, outgoing, now)
    for start in commit.children:
        start_child(run_id, start, now)
    # A grouped run leaving `running` frees a slot of its group: the first run set aside in it
    # is due again, and runners waiting for a slot look.
    freed = commit.transition is not None and fenced[1] is not None
    if freed:
        cursor.execute(*statements.unpark(fenced[1]))
    if commit.messages or commit.children or freed:
        notify(cursor)
    transition = commit.transition
    if transition is not None and transition.status == RunStatus.WAITING:
        _wake_if_message_waiting(cursor, rid, transition.wait_queues, now)
    return CommitResult(entry_ids=entry_ids, cancel_requested=bool(fenced[0]), hold=bool(fenced[2]))


def insert_events(cursor: Any, rid: Any, events: list[shared.EventRow], now: dt.datetime) -> None:
    if not events:
        return
    flat: list[Any] = []
    for name, payload, scope, step, attempt in events:
        flat += [rid, name, values.j(payload), values.t(now), scope, step, attempt, False]
    cursor.execute(shared.INSERT_EVENTS.format(rows=", ".join([shared.EVENT_ROW] * len(events))), flat)


def insert_chunks(cursor: Any, rid: Any, chunks: list[StreamChunk], now: dt.datetime) -> None:
    if not chunks:
        return
    flat: list[Any] = []
    for c in chunks:
        o = c.origin
        flat += [rid, c.stream, values.j(c.data), values.t(now), o.scope, o.step, o.attempt, c.seq]
    cursor.execute(shared.INSERT_CHUNKS.format(rows=", ".join([shared.CHUNK_ROW] * len(chunks))), flat)


def recover_cut_attempts(run: Run, reason: str, lost_at: dt.datetime | None, now: dt.datetime) -> None:
    """Before a run whose last execution was cut off executes again (its runner died, stopped
    mid-step, or the store failed under it): mark the events of attempts that never recorded an
    outcome lost (and say which in a `$lost` event, for followers), then record the attempt each
    step marked `running` was in as `lost`, so the timeline shows it and the rerun is the next
    attempt. The caller holds the run's row (a transaction)."""
    rid = values.rid(str(run.id))
    with connection.cursor() as cursor:
        cursor.execute(shared.MARK_LOST_EVENTS, [True, rid, EntryStatus.COMPLETED])
        lost = sorted(cursor.fetchall())
        if lost:
            payload = lost_events_payload([(row[0], row[1], row[2]) for row in lost])
            insert_events(cursor, rid, [(LOST_EVENTS, payload, "", "", None)], now)
    running = Entry.objects.filter(run=run, superseded=False, kind=EntryKind.STEP, status=EntryStatus.RUNNING)
    for entry in running:
        last = Attempt.objects.filter(entry=entry).order_by("-number").first()
        started = (last.retry_at or last.finished_at) if last is not None else entry.started_at
        error = lost_attempt_error(reason, lost_at or now)
        Attempt.objects.create(
            entry=entry, number=entry.attempts + 1, started_at=started or now, finished_at=lost_at or now,
            outcome=Outcome.LOST, error=error,
        )  # fmt: skip
        entry.attempts += 1
        entry.status, entry.wake_at, entry.error = EntryStatus.RETRYING, now, error
        entry.save(update_fields=["attempts", "status", "wake_at", "error"])


def _consume(
    cursor: Any, rid: Any, entry_id: int, message_ids: list[int], auto_completed: set[int], now: dt.datetime
) -> None:
    complete = set(message_ids) <= auto_completed
    cursor.execute(
        shared.CONSUME_MESSAGES.format(
            by="%s",
            complete=", completed_at = COALESCE(completed_at, %s)" if complete else "",
            ids=values.marks(len(message_ids)),
            guard="",
        ),
        [values.t(now), entry_id, *([values.t(now)] if complete else []), rid, *message_ids],
    )
    if cursor.rowcount != len(message_ids):
        raise LeaseLost("a message was consumed by someone else")


def _wake_if_message_waiting(cursor: Any, rid: Any, queues: tuple[str, ...] | None, now: dt.datetime) -> None:
    if queues is None:
        return
    cursor.execute(shared.message_waiting(len(queues)), [rid, *queues])
    if cursor.fetchone() is not None:
        cursor.execute(shared.WAKE_RUN, [values.t(now), rid])
