"""A commit of the engine as SQL: everything in one transaction behind the run's fence.

Two ways to send it, one set of statements (`sql`): PostgreSQL sends the common commit (one
entry and its attempt, state, events, a transition) as ONE statement of data-modifying CTEs that
all hang off the fenced run update, so a lost lease writes nothing; every other commit, and every
commit on SQLite, runs the same statements one by one inside `transaction.atomic()`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, connection, transaction

from ...core.exceptions import ChildConflict, LeaseLost, RunFinished, RunNotFound
from ...core.ids import new_run_id
from ...core.keys import key_identity, quoted
from ...core.new_run import NewRun
from ...core.records import (
    LIVE,
    LOST_EVENTS,
    TERMINAL,
    AttemptWrite,
    ChildStart,
    Commit,
    CommitResult,
    EntryKind,
    EntryStatus,
    EntryWrite,
    MessageRecord,
    Outcome,
    OutgoingMessage,
    RunRecord,
    RunStatus,
    lost_attempt_error,
    lost_events_payload,
)
from ...models import Attempt, Entry, Run
from . import statements, values
from .notify import NOTIFY_CHANNEL, notify, notify_now
from .prepared import hot_cursor
from .statements import postgres, shared


def commit(run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
    on_pg = values.pg()
    if on_pg and fits_one_statement(commit):
        return _commit_one_statement(run_id, owner, commit, now)
    return _commit_statements(run_id, owner, commit, now, on_pg)


def fits_one_statement(commit: Commit) -> bool:
    """The commits the one-statement path handles: at most one entry and its attempt (a wait's
    entry may consume messages, and complete them all when none is answered later), state, events
    and a transition that needs no message check."""
    if commit.messages or commit.children or commit.prune or len(commit.entries) > 1:
        return False
    consumes = set(commit.entries[0][0].consumes) if commit.entries else set()
    if commit.complete and ({mid for mid, _r in commit.complete} != consumes or _answered(commit)):
        return False
    transition = commit.transition
    return transition is None or transition.status != RunStatus.WAITING or transition.wait_queues is None


def _commit_one_statement(run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
    text, params = one_statement(run_id, owner, commit, now)
    with hot_cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    result = outcome(run_id, owner, commit, row)
    if isinstance(result, LeaseLost):
        raise result
    return result


Pending = tuple[str, str, Commit, dt.datetime]  # run id, owner, commit, now


def one_statement(run_id: str, owner: str, commit: Commit, now: dt.datetime) -> tuple[str, list[Any]]:
    """A commit of the one-statement kind (`fits_one_statement`) as one statement and its parameters."""
    ctes, params, selects = _statement_parts(run_id, owner, commit, now)
    return f"WITH {', '.join(ctes)} SELECT {', '.join(selects)}", params


def commit_group(commits: list[Pending]) -> list[CommitResult | LeaseLost]:
    """Several runs' commits, each of the one-statement kind (`fits_one_statement`), as ONE
    statement (`group_statement`): one round trip, one transaction, one WAL flush. A lost lease
    loses that commit only (its LeaseLost is returned, not raised). Any error (a constraint, a
    deadlock) rolls the whole statement back: nothing of it was written."""
    text, params, order = group_statement(commits)
    with hot_cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    return group_outcomes(commits, order, row)


def group_statement(commits: list[Pending]) -> tuple[str, list[Any], list[int]]:
    """The commits as one statement, its parameters, and the order their parts go in. Each run's
    CTEs hang off its own fenced run update. In order of shape, so that batches of the same shapes
    are the same text (one prepared statement each) whatever order their commits came in: a busy
    runner repeats a few shapes."""
    order = sorted(range(len(commits)), key=lambda i: _shape(commits[i][2]))
    ctes: list[str] = []
    params: list[Any] = []
    selects: list[str] = []
    for n, i in enumerate(order):
        run_id, owner, commit, now = commits[i]
        more_ctes, more_params, more_selects = _statement_parts(run_id, owner, commit, now, str(n))
        ctes += more_ctes
        params += more_params
        selects += more_selects
    return f"WITH {', '.join(ctes)} SELECT {', '.join(selects)}", params, order


def group_outcomes(commits: list[Pending], order: list[int], row: Any) -> list[CommitResult | LeaseLost]:
    """Each commit's outcome, in the order the commits were given, from the group statement's row."""
    outcomes: list[CommitResult | LeaseLost] = [LeaseLost("not written")] * len(commits)
    for n, i in enumerate(order):
        run_id, owner, commit, _now = commits[i]
        outcomes[i] = outcome(run_id, owner, commit, row[3 * n : 3 * n + 3])
    return outcomes


def stored_attempt(write: EntryWrite, attempt: AttemptWrite | None) -> AttemptWrite | None:
    """The attempt row a commit writes: none for a step that succeeded at its first attempt in a
    new entry, which says all of it (number 1, ok, the entry's start and end: `Entry.attempt_history`
    gives it back). Most steps are that: it saves a row, two index insertions and a foreign-key
    check per step, about a third of a step's WAL (`bench/side_by_side.py` prints it by table)."""
    if (
        attempt is not None
        and write.id is None
        and write.kind == EntryKind.STEP
        and write.status == EntryStatus.COMPLETED
        and write.attempts == 1
        and attempt.number == 1
        and attempt.outcome == Outcome.OK
        and attempt.error is None
        and attempt.delay is None
        and attempt.retry_at is None
        and attempt.started_at == write.started_at
        and attempt.finished_at == write.finished_at
    ):
        return None
    return attempt


def _shape(commit: Commit) -> tuple[Any, ...]:
    """What decides the text of a commit's part of a statement (see `_statement_parts`)."""
    write, attempt = commit.entries[0] if commit.entries else (None, None)
    attempt = stored_attempt(write, attempt) if write is not None else attempt
    return (
        commit.state is not None,
        write is None,
        write is not None and write.id is not None,
        attempt is not None,
        len(write.consumes) if write is not None else 0,
        bool(commit.complete),
        len(shared.event_rows(commit)),
        commit.transition is not None and commit.transition.status in TERMINAL,
        commit.transition is not None,
    )


def outcome(run_id: str, owner: str, commit: Commit, row: Any) -> CommitResult | LeaseLost:
    """What a statement's row (or its slice of a group's) says of a commit: LeaseLost returned, not raised."""
    cancel_requested, entry_id, _notified = row
    if cancel_requested is None:
        return LeaseLost(f"run {run_id} is no longer held by {owner}, or its entry was replayed")
    return CommitResult(
        entry_ids=[entry_id] if commit.entries else [], cancel_requested=bool(cancel_requested)
    )


def _statement_parts(
    run_id: str, owner: str, commit: Commit, now: dt.datetime, n: str = ""
) -> tuple[list[str], list[Any], list[str]]:
    """The CTEs of one run's commit (named r{n}, e{n}, ...: several commits can share a
    statement), their parameters in order, and the three values the statement selects for it:
    whether a cancel was requested (NULL: the fence matched nothing), the entry id, and a count
    that makes PostgreSQL evaluate the slot-freeing NOTIFY."""
    r, e = f"r{n}", f"e{n}"
    rid = values.rid(run_id)
    sets, params = shared.run_update(commit, now, on_pg=True)
    where, fence_params = shared.fence(rid, owner, commit)
    params += fence_params
    consumes = commit.entries[0][0].consumes if commit.entries else []
    if consumes:  # every message the wait took is still there to take, or nothing is written
        where += f" AND ({postgres.COUNT_CONSUMABLE.format(ids=values.marks(len(consumes)))}) = %s"
        params += [rid, *consumes, len(consumes)]
    ctes = [
        f"{r} AS (UPDATE workflows_run SET {sets} WHERE {where} RETURNING cancel_requested, concurrency_group)"
    ]
    entry_select = "NULL::bigint"
    if commit.entries:
        [(write, attempt)] = commit.entries
        attempt = stored_attempt(write, attempt)
        if write.id is None:
            statement, entry_params = shared.insert_entry(rid, write, on_pg=True, after=r)
        else:
            statement, entry_params = shared.update_entry(write, on_pg=True, after=r)
        ctes.append(f"{e} AS ({statement})")
        params += entry_params
        entry_select = f"(SELECT id FROM {e})"
        if attempt is not None:
            statement, attempt_params = shared.insert_attempt(attempt, e, on_pg=True)
            ctes.append(f"a{n} AS ({statement} RETURNING id)")
            params += attempt_params
        if consumes:  # by the entry just written; completed too when the wait answers none
            complete = bool(commit.complete)
            statement = shared.CONSUME_MESSAGES.format(
                by=f"(SELECT id FROM {e})",
                complete=", completed_at = COALESCE(completed_at, %s::timestamptz)" if complete else "",
                ids=values.marks(len(consumes)),
                guard=f" AND EXISTS (SELECT 1 FROM {e})",
            )
            ctes.append(f"c{n} AS ({statement} RETURNING id)")
            params += [values.t(now), *([values.t(now)] if complete else []), rid, *consumes]
    events = shared.event_rows(commit)
    if events:
        rows = ", ".join([postgres.EVENT_ROW_AFTER] * len(events))
        ctes.append(f"v{n} AS ({postgres.INSERT_EVENTS_AFTER.format(rows=rows, after=r)} RETURNING id)")
        params += [rid, values.t(now)]
        for name, payload, scope, step, number in events:
            params += [name, values.j(payload), scope, step, number]
    slot_freed = "NULL"
    if commit.transition is not None:  # a grouped run leaving `running` frees its group's slot:
        # the first run set aside in the group is due again, and runners waiting for a slot look
        ctes.append(
            f"n{n} AS (SELECT pg_notify(%s, '')::text AS sent FROM {r} WHERE {r}.concurrency_group IS NOT NULL)"
        )
        params.append(NOTIFY_CHANNEL)
        statement, unpark_params = statements.unpark(after=r)
        ctes.append(f"u{n} AS ({statement} RETURNING id)")
        params += unpark_params
        slot_freed = f"(SELECT COUNT(*) FROM n{n})"
    return ctes, params, [f"(SELECT cancel_requested FROM {r})", entry_select, slot_freed]


def _answered(commit: Commit) -> bool:
    return any(response is not None for _mid, response in commit.complete)


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
    cursor.execute(
        f"UPDATE workflows_run SET {sets} WHERE {where} RETURNING cancel_requested, concurrency_group",
        params + fence_params,
    )
    fenced = cursor.fetchone()
    if fenced is None:
        raise LeaseLost(f"run {run_id} is no longer held by {owner}, or its entry was replayed")

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
    return CommitResult(entry_ids=entry_ids, cancel_requested=bool(fenced[0]))


def insert_events(cursor: Any, rid: Any, events: list[shared.EventRow], now: dt.datetime) -> None:
    if not events:
        return
    flat: list[Any] = []
    for name, payload, scope, step, attempt in events:
        flat += [rid, name, values.j(payload), values.t(now), scope, step, attempt, False]
    cursor.execute(shared.INSERT_EVENTS.format(rows=", ".join([shared.EVENT_ROW] * len(events))), flat)


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
    statement, params = shared.MESSAGE_WAITING, [rid]
    if queues:
        statement += f" AND queue IN ({values.marks(len(queues))})"
        params += list(queues)
    cursor.execute(statement + " LIMIT 1", params)
    if cursor.fetchone() is not None:
        cursor.execute(shared.WAKE_RUN, [values.t(now), rid])


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


def send_to_run(outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord:
    """PostgreSQL, a message to a run by id, on its own (no audit, no caller's transaction to
    join): one statement, as `insert_message` + notify would write it."""
    assert outgoing.run_id is not None
    rid = values.rid(outgoing.run_id)
    params = [
        RunStatus.PENDING, RunStatus.WAITING, values.t(now), outgoing.priority, rid, *LIVE,
        *message_values(outgoing, now), NOTIFY_CHANNEL,
    ]  # fmt: skip
    with hot_cursor() as cursor:
        cursor.execute(postgres.SEND_TO_RUN, params)
        row = cursor.fetchone()
    if row is None:
        status = Run.objects.filter(id=outgoing.run_id).values_list("status", flat=True).first()
        if status is None:
            raise RunNotFound(f"no run with id {quoted(outgoing.run_id)}")
        raise RunFinished(f"run {outgoing.run_id} is {status}; it takes no more messages")
    return MessageRecord(
        id=row[0], run_id=outgoing.run_id, queue=outgoing.queue, body=outgoing.body, sent_at=now,
        trace_context=outgoing.trace_context or None,
    )  # fmt: skip


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


def insert_message(cursor: Any, outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord | None:
    """Store a message and wake its run (created when it names a missing workflow and key); the
    caller holds a transaction. RunFinished when the target run has ended."""
    if outgoing.run_id is not None:
        target = Run.objects.filter(id=outgoing.run_id).values_list("id", "status").first()
        if target is None:
            raise RunNotFound(f"no run with id {quoted(outgoing.run_id)}")
    else:
        assert outgoing.workflow is not None and outgoing.key is not None
        found = Run.objects.filter(workflow=outgoing.workflow, key_hash=key_identity(outgoing.key)[1])
        target = found.values_list("id", "status").first()
        if target is None:
            with transaction.atomic():  # a savepoint: a concurrent creator wins, then we read it
                try:
                    run = create_run(NewRun.of_message(outgoing, now))
                    target = (run.id, run.status)
                except IntegrityError:
                    target = None
            if target is None:
                target = found.values_list("id", "status").first()
    assert target is not None
    run_pk, status = target
    if status in TERMINAL:
        if outgoing.drop_if_ended:
            return None
        raise RunFinished(f"run {run_pk} is {status}; it takes no more messages")
    rid = values.rid(str(run_pk))
    cursor.execute(
        shared.WAKE_FOR_MESSAGE,
        [RunStatus.PENDING, RunStatus.WAITING, values.t(now), outgoing.priority, rid, *LIVE],
    )
    if cursor.rowcount != 1:
        if outgoing.drop_if_ended:
            return None
        raise RunFinished(f"run {run_pk} finished; it takes no more messages")
    cursor.execute(shared.INSERT_MESSAGE, [rid, *message_values(outgoing, now)])
    return MessageRecord(
        id=cursor.fetchone()[0], run_id=str(run_pk), queue=outgoing.queue, body=outgoing.body, sent_at=now,
        trace_context=outgoing.trace_context or None,
    )  # fmt: skip
