"""A run's creation as SQL: runnable, held by the runner that starts it, with its first message,
as a child of a commit; each from a `NewRun`."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction

from ...core.exceptions import ChildConflict
from ...core.ids import new_run_id
from ...core.keys import key_identity
from ...core.new_run import NewRun
from ...core.records import (
    ChildStart,
    OutgoingMessage,
    RunRecord,
    RunStatus,
)
from ...models import Run
from . import values
from .notify import NOTIFY_CHANNEL, notify_now
from .prepared import hot_cursor
from .statements import postgres, shared


def create_run(new: NewRun) -> Run:
    """A new run, runnable at once. The caller holds a transaction (and notifies)."""
    key_text, key_hash = key_identity(new.key)
    return Run.objects.create(
        parent_id=new.parent_id,
        parent_queue=new.parent_queue,
        workflow=new.workflow,
        key=new.key,
        key_text=key_text,
        key_hash=key_hash,
        version=new.version,
        status=RunStatus.PENDING,
        state=new.initial_state,
        created_at=new.now,
        updated_at=new.now,
        transitioned_at=new.now,
        wake_at=new.now,
        trace_context=new.trace_context or None,
        priority=new.priority,
        concurrency_group=new.concurrency_group,
    )


def insert_run_if_new(new: NewRun) -> RunRecord | None:
    """PostgreSQL: a new run, runnable at once, with its `first_message` if any, and the NOTIFY
    that wakes runners, in ONE statement (no look-up, savepoint or separate notify first: the start
    of a run costs one round trip). None when the workflow already has a run of that key."""
    statement = new_run_statement(new)
    with hot_cursor() as cursor:
        cursor.execute(statement.sql, statement.params)
        row = cursor.fetchone()
    return None if row is None else statement.record


@dataclass(frozen=True)
class NewRunStatement:
    """A new-run statement and the run it creates, made from the very values it inserts. The
    statement answers one column, and a row only when it inserted: a start reads nothing back
    (decoding a whole run row was about a sixth of a start's CPU in the client)."""

    sql: str
    params: list[Any]
    record: RunRecord


def new_run_statement(new: NewRun) -> NewRunStatement:
    """PostgreSQL: `insert_run_if_new`'s statement, runnable now (its row: the notify's column)."""
    now = new.now
    first, record = _new_run(RunStatus.PENDING, new, wake_at=now, concurrency_group=new.concurrency_group)
    params = [*first, values.t(now), values.j(new.trace_context or None), new.priority, new.concurrency_group]
    if new.first_message is None:
        return NewRunStatement(postgres.INSERT_RUN_IF_NEW, [*params, NOTIFY_CHANNEL], record)
    params += [*message_values(new.first_message, now), NOTIFY_CHANNEL]
    return NewRunStatement(postgres.INSERT_RUN_WITH_MESSAGE_IF_NEW, params, record)


def held_run_statement(new: NewRun, owner: str, lease_until: dt.datetime) -> NewRunStatement:
    """PostgreSQL: a new run leased to `owner` until `lease_until`, as a claim leaves it (running,
    started now, due since now), in one statement and without waking runners; no row when the key
    is taken. Only for runs outside any concurrency group (their admission needs the group's lock:
    a claim) and without a first message: those fields of `new` are not written."""
    now = new.now
    first, record = _new_run(RunStatus.RUNNING, new, wake_at=lease_until, lease_owner=owner, due_at=now)
    params = [
        *first,
        values.t(now),
        values.t(lease_until),
        owner,
        values.j(new.trace_context or None),
        new.priority,
    ]
    return NewRunStatement(postgres.INSERT_HELD_RUN_IF_NEW, params, record)


def create_held_run(record: RunRecord) -> bool:
    """SQLite: the held run `held_run_statement` made `record` of (leased to its `lease_owner`
    until its `wake_at`, as a claim leaves it), created through the ORM in a transaction of its
    own (a savepoint inside the caller's); no runner is woken. False when the key is taken."""
    key_text, key_hash = key_identity(record.key)
    now = record.created_at
    assert now is not None  # a new run's record always has it
    try:
        with transaction.atomic():
            Run.objects.create(
                id=record.id, workflow=record.workflow, key=record.key, key_text=key_text, key_hash=key_hash,
                version=record.version, status=record.status, state=record.state, created_at=now,
                updated_at=now, transitioned_at=now, started_at=now, wake_at=record.wake_at,
                lease_owner=record.lease_owner, trace_context=record.trace_context, priority=record.priority,
            )  # fmt: skip
    except IntegrityError:  # the key is taken
        return False
    return True


def _new_run(status: str, new: NewRun, **columns: Any) -> tuple[list[Any], RunRecord]:
    """What both new-run statements share: a new id and their first values (the id, the key, the
    version, the status, the state, then created_at, updated_at and transitioned_at: now); and the
    record reading the new row back would give (fresh: it has no history): these values and
    `columns`, the statements leaving the rest of its columns at their defaults."""
    run_id = str(new_run_id())
    key_text, key_hash = key_identity(new.key)
    now = new.now
    params = [
        values.rid(run_id), new.workflow, values.j(new.key), key_text, key_hash, new.version, status,
        values.j(new.initial_state), values.t(now), values.t(now), values.t(now),
    ]  # fmt: skip
    record = RunRecord(
        id=run_id, workflow=new.workflow, key=list(new.key), version=new.version, status=status,
        state=new.initial_state, created_at=now, trace_context=new.trace_context or None,
        priority=new.priority, fresh=True, **columns,
    )  # fmt: skip
    return params, record


def start_run(new: NewRun) -> Run:
    """A new run, with its `first_message` if any, in a transaction of its own (a savepoint inside
    the caller's), runners woken when it commits. IntegrityError when the workflow already has a
    run of that key."""
    with transaction.atomic():
        run = create_run(new)
        if new.first_message is not None:
            insert_first_message(str(run.id), new.first_message, new.now)
        notify_now()
    return run


def insert_first_message(run_id: str, first_message: OutgoingMessage, now: dt.datetime) -> None:
    """A new run's first message, in the caller's transaction that created the run. Its wake is
    left as the creation set it (a debounced run still waits)."""
    with connection.cursor() as cursor:
        cursor.execute(shared.INSERT_MESSAGE, [values.rid(run_id), *message_values(first_message, now)])
        cursor.fetchone()  # its id (SQLite completes a RETURNING statement as it is read)


def message_values(outgoing: OutgoingMessage, now: dt.datetime) -> list[Any]:
    """A message's stored values, in the order every message insert takes them: queue, body,
    sent_at, trace context."""
    return [outgoing.queue, values.j(outgoing.body), values.t(now), values.j(outgoing.trace_context or None)]


def start_child(parent_id: str, start: ChildStart, now: dt.datetime) -> None:
    """Create a child run with its parent link, in the parent's commit; nothing when the parent
    already has that child. ChildConflict when another run holds the key."""
    found = Run.objects.filter(workflow=start.workflow, key_hash=key_identity(start.key)[1])
    existing = found.values_list("parent_id", flat=True)
    if not existing.exists():
        with transaction.atomic():  # a savepoint: a concurrent creator wins, then we check it
            try:
                create_run(NewRun.of_child(start, parent_id=parent_id, now=now))
                return
            except IntegrityError:
                pass
    owner = existing.first()
    if owner is None or str(owner) != parent_id:
        raise ChildConflict(f"a {start.workflow} run already has the key {start.key!r}")
