"""The statements both databases run, named once. Statements hold `%s` placeholders (Django's
cursor style) and are built from the same column lists, so an entry is written by one path
whichever commit carries it. On PostgreSQL the placeholders are typed (`%s::jsonb`), since a
statement like `INSERT ... SELECT %s FROM r` gives its parameters no column to take a type from;
SQLite needs no casts."""

from __future__ import annotations

import datetime as dt
from functools import cache
from typing import Any

from ....core.records import LIVE, TERMINAL, AttemptWrite, Commit, EntryWrite, RunStatus
from ..values import j, marks, pg, rid, t
from .pausing import HOLD, NOT_PAUSED, unless_paused

SELECT_RUN = "SELECT {columns} FROM workflows_run WHERE id = %s"
SELECT_RUN_BY_KEY = "SELECT {columns} FROM workflows_run WHERE workflow = %s AND key_hash = %s"
SELECT_HISTORY = (
    "SELECT {columns} FROM workflows_entry WHERE run_id = %s AND NOT superseded ORDER BY scope, position"
)


@cache
def select_available_messages(columns: str, queues: int) -> str:
    """A run's unconsumed messages, oldest first, of `queues` named queues (0: of every queue);
    built once per number of queues."""
    of_queues = f" AND queue IN ({marks(queues)})" if queues else ""
    return (
        f"SELECT {columns} FROM workflows_message WHERE run_id = %s AND consumed_at IS NULL{of_queues}"
        " ORDER BY id LIMIT %s"
    )


def _typed(kind: str, on_pg: bool) -> str:
    return f"%s::{kind}" if on_pg else "%s"


# --- claims and leases ---------------------------------------------------------------------------------

WAS = "started_at AS was_started, status AS was_status, lease_owner AS was_owner, wake_at AS was_due"
CLAIM_ORDER = "priority DESC, wake_at, id"  # higher priority first, FIFO within one (the claim index)
CLAIM_DUE = (
    f"SELECT id AS claim_id, {WAS} FROM workflows_run WHERE wake_at <= %s"
    f" AND status IN (%s, %s, %s) AND workflow IN ({{names}})"
    f" AND {NOT_PAUSED.format(name='workflows_run.workflow')} ORDER BY {CLAIM_ORDER} LIMIT %s"
)
# PostgreSQL: the same pick, read per workflow. The claim index (workflow, priority, wake_at, id)
# yields claim order within one workflow only: ORDER BY over `workflow IN (...)` read and sorted
# every due run of those workflows at every claim, so a claim cost grew with the backlog. Here each
# workflow's index scan locks its first n runs in claim order, skipping those another claim holds
# (SKIP LOCKED: so it never comes back short while more are due, and FOR UPDATE rechecks a row
# another claim changed since the snapshot); the first n of those are taken, and the rest of the
# locks end with the statement. n is written into the text (a prepared statement per claim size):
# a generic plan then knows how few rows come out, and joins them to the update by primary key.
PICKED = "id, started_at, status, lease_owner, wake_at, priority"  # what WAS and CLAIM_ORDER read
# Runs of concurrency groups: the first due runs (in claim order) of groups that have a free slot,
# at most `max - executing` of a group, executing meaning running under a live lease (a crashed
# runner's run stops counting when its lease lapses). Only correct while no other claim of these
# workflows runs at once: on PostgreSQL the caller holds GROUP_LOCK first (and this statement's
# snapshot is taken after it has it); SQLite serialises writers anyway.
CLAIM_GROUPED = (
    "WITH caps (workflow, cap) AS (VALUES {caps}),"
    " busy AS (SELECT concurrency_group AS g, COUNT(*) AS n FROM workflows_run"
    " WHERE status = %s AND concurrency_group IS NOT NULL AND wake_at > %s AND workflow IN ({names})"
    " GROUP BY concurrency_group),"
    # A run asked to cancel needs no slot: it only ends (g NULL, as if ungrouped).
    " due AS (SELECT r.id, r.workflow, CASE WHEN r.cancel_requested THEN NULL ELSE r.concurrency_group END AS g,"
    " r.priority, r.wake_at FROM workflows_run r"
    " WHERE r.wake_at <= %s AND r.status IN (%s, %s, %s) AND r.workflow IN ({names})"
    f" AND {NOT_PAUSED.format(name='r.workflow')}"
    " AND (r.cancel_requested OR NOT EXISTS (SELECT 1 FROM busy JOIN caps ON caps.workflow = r.workflow"
    " WHERE busy.g = r.concurrency_group AND busy.n >= caps.cap))"
    f" ORDER BY {CLAIM_ORDER} LIMIT %s),"
    " ranked AS (SELECT due.id, due.workflow, due.g,"
    " ROW_NUMBER() OVER (PARTITION BY due.g ORDER BY due.priority DESC, due.wake_at, due.id) AS nth FROM due),"
    " admitted AS (SELECT ranked.id FROM ranked JOIN caps ON caps.workflow = ranked.workflow"
    " LEFT JOIN busy ON busy.g = ranked.g WHERE ranked.g IS NULL OR ranked.nth + COALESCE(busy.n, 0) <= caps.cap)"
    f" SELECT id AS claim_id, {WAS} FROM workflows_run WHERE id IN (SELECT id FROM admitted)"
    f" ORDER BY {CLAIM_ORDER} LIMIT %s"
)
# Before that claim: set aside the due runs of groups that are full (wake_at NULL, their due time
# kept in held_at), so neither this claim nor the next ones pass them again: runs held back cost
# claims nothing. A run of the group leaving `running` puts the first one back (UNPARK).
PARK_BATCH = 1000  # runs a claim sets aside at most (the next claim goes on)
PARK_HELD = (
    "WITH caps (workflow, cap) AS (VALUES {caps}),"
    " busy AS (SELECT concurrency_group AS g, workflow AS w, COUNT(*) AS n FROM workflows_run"
    " WHERE status = %s AND concurrency_group IS NOT NULL AND wake_at > %s AND workflow IN ({names})"
    " GROUP BY concurrency_group, workflow),"
    " filled AS (SELECT busy.g FROM busy JOIN caps ON caps.workflow = busy.w WHERE busy.n >= caps.cap)"
    " UPDATE workflows_run SET held_at = COALESCE(held_at, wake_at), wake_at = NULL WHERE id IN"
    # from the full groups (few) into their due runs (workflows_run_group_due), a batch at a time
    " (SELECT r.id FROM filled JOIN workflows_run r ON r.concurrency_group = filled.g"
    " WHERE r.wake_at <= %s AND r.status IN (%s, %s, %s) AND r.workflow IN ({names}) AND NOT r.cancel_requested"
    f" LIMIT {PARK_BATCH})"
)
# The first run set aside in a group (priority, then its due time) becomes due again at its due
# time, so it keeps its place in line. SKIP LOCKED: two runs ending at once put back two.
FIRST_HELD = (
    "SELECT h.id FROM workflows_run h WHERE h.concurrency_group = {group} AND h.held_at IS NOT NULL"
    " AND h.wake_at IS NULL AND h.status IN (%s, %s, %s)"
    " ORDER BY h.priority DESC, h.held_at, h.id LIMIT 1{lock}"
)


# A runner starting (new code: `max` raised, or `concurrency` removed) puts back in line every run
# of its workflows that claims set aside, at its due time: else they would come back only one per
# freed slot. Bounded by the runs set aside: it reads the held index (workflows_run_held, whose
# rows are those runs), never scanning the table. The next claim sets aside again those whose group is
# still full, at the new max.
UNPARK_ALL = (
    "UPDATE workflows_run SET wake_at = held_at, held_at = NULL WHERE held_at IS NOT NULL AND wake_at IS NULL"
    " AND status IN (%s, %s, %s) AND workflow IN ({names})"
)


def unpark_all(workflows: list[str]) -> tuple[str, list[Any]]:
    return UNPARK_ALL.format(names=marks(len(workflows))), [*LIVE, *workflows]


def park_held(caps: dict[str, int], now: dt.datetime) -> tuple[str, list[Any]]:
    names = list(caps)
    statement = PARK_HELD.format(
        caps=", ".join(["(%s, CAST(%s AS INTEGER))"] * len(names)), names=marks(len(names))
    )
    params: list[Any] = [v for name in names for v in (name, caps[name])]
    return statement, [*params, RunStatus.RUNNING, t(now), *names, t(now), *LIVE, *names]


CLAIM_LEASE = (
    "UPDATE workflows_run SET status = %s, lease_owner = %s, wake_at = %s, updated_at = %s, transitioned_at = %s,"
    " started_at = COALESCE(workflows_run.started_at, %s), held_at = NULL"
)
HEARTBEAT = (  # held_at: a lapsed run set aside while its runner was only slow is its own again
    "UPDATE workflows_run SET wake_at = %s, held_at = NULL WHERE lease_owner = %s AND status = %s"
    " AND id IN ({ids}) RETURNING id, cancel_requested"
)


def claim_grouped(caps: dict[str, int], pool: int, limit: int, now: dt.datetime) -> tuple[str, list[Any]]:
    """CLAIM_GROUPED for workflow -> max `caps`: admit up to `limit` from the first `pool` due runs
    of groups not full."""
    names = list(caps)
    statement = CLAIM_GROUPED.format(
        caps=", ".join(["(%s, CAST(%s AS INTEGER))"] * len(names)), names=marks(len(names))
    )
    params: list[Any] = [v for name in names for v in (name, caps[name])]
    params += [RunStatus.RUNNING, t(now), *names, t(now), *LIVE, *names, pool, limit]
    return statement + (" FOR UPDATE SKIP LOCKED" if pg() else ""), params


def claim_lease(owner: str, lease_until: dt.datetime, now: dt.datetime) -> tuple[str, list[Any]]:
    return CLAIM_LEASE, [RunStatus.RUNNING, owner, t(lease_until), t(now), t(now), t(now)]


# --- a commit: the fenced run update ----------------------------------------------------------------


# Every commit starts with it: the run's update behind its fence (`fence`), which also locks the
# run row, so a sender racing with a suspension either lands before it (and is seen) or wakes it after.
# Its third column, `hold`: the run or its workflow was paused since its claim (`CommitResult.hold`).
FENCED_RUN_UPDATE = f"UPDATE workflows_run SET {{sets}} WHERE {{where}} RETURNING cancel_requested, concurrency_group, {HOLD} AS hold"


def fence(run: Any, owner: str, commit: Commit) -> tuple[str, list[Any]]:
    """The WHERE of the run update every commit starts with: only the lease holder writes, and
    only over entries still current (an operator's replay supersedes them). `run` is `rid(...)`."""
    where = "id = %s AND lease_owner = %s AND status = %s"
    params: list[Any] = [run, owner, RunStatus.RUNNING]
    for write, _attempt in commit.entries:
        if write.id is not None:
            where += " AND EXISTS (SELECT 1 FROM workflows_entry WHERE id = %s AND superseded = %s)"
            params += [write.id, False]
    return where, params


def run_update(commit: Commit, now: dt.datetime, on_pg: bool) -> tuple[str, list[Any]]:
    """The SET clause of the fenced run update: timestamps, state and the transition."""
    sets, params = ["updated_at = %s"], [t(now)]
    if commit.state is not None:
        sets.append(f"state = {_typed('jsonb', on_pg)}")
        params.append(j(commit.state))
    transition = commit.transition
    if transition is None:
        return ", ".join(sets), params
    # only a transition moves an indexed column (see Run.transitioned_at)
    sets += ["transitioned_at = %s", "held_at = NULL", "pause_requested = FALSE"]
    params.append(t(now))
    if transition.status in TERMINAL:
        sets += ["status = %s", "wake_at = NULL", "lease_owner = ''", "finished_at = %s", "result = %s"]
        sets += ["error = %s"]
        params += [transition.status, t(now), j(transition.result), j(transition.error)]
    elif transition.status == RunStatus.PAUSED:  # a step out of retries, `on_exhausted="pause"`
        sets += ["status = %s", "wake_at = NULL", "paused_due_at = %s", "lease_owner = ''"]
        params += [transition.status, t(transition.wake_at)]
    else:  # waiting, or released (pending); paused instead when an operator asked meanwhile
        more_sets, more_params = unless_paused(transition.status, t(transition.wake_at), on_pg)
        sets += more_sets
        params += more_params
    return ", ".join(sets), params


# --- a commit: entries and attempts (one path for both kinds of commit) ---------------------------

ENTRY_COLUMNS = (
    "run_id", "scope", "position", "name", "kind", "status", "input", "output", "error", "meta",
    "attempts", "started_at", "finished_at", "wake_at", "superseded",
)  # fmt: skip
ENTRY_UPDATED = ("status", "input", "output", "error", "meta", "attempts", "finished_at", "wake_at")
ATTEMPT_COLUMNS = ("entry_id", "number", "started_at", "finished_at", "outcome", "error", "delay", "retry_at")
_TYPES = {
    "input": "jsonb", "output": "jsonb", "error": "jsonb", "meta": "jsonb", "payload": "jsonb",
    "started_at": "timestamptz", "finished_at": "timestamptz", "wake_at": "timestamptz",
    "retry_at": "timestamptz", "delay": "float8", "attempts": "integer", "position": "integer",
    "number": "integer", "superseded": "boolean",
}  # fmt: skip


def _placeholders(columns: tuple[str, ...], on_pg: bool) -> list[str]:
    return [_typed(_TYPES[c], on_pg) if c in _TYPES else "%s" for c in columns]


@cache
def _insert_entry_sql(on_pg: bool, after: str) -> str:
    values = ", ".join(_placeholders(ENTRY_COLUMNS, on_pg))
    rows = f"SELECT {values} FROM {after}" if after else f"VALUES ({values})"
    return f"INSERT INTO workflows_entry ({', '.join(ENTRY_COLUMNS)}) {rows} RETURNING id"


@cache
def _update_entry_sql(on_pg: bool, after: str) -> str:
    sets = ", ".join(
        f"{c} = {p}" for c, p in zip(ENTRY_UPDATED, _placeholders(ENTRY_UPDATED, on_pg), strict=True)
    )
    guard = f" AND EXISTS (SELECT 1 FROM {after})" if after else ""
    return f"UPDATE workflows_entry SET {sets} WHERE id = %s AND superseded = %s{guard} RETURNING id"


@cache
def _insert_attempt_sql(on_pg: bool, entry_cte: str) -> str:
    values = ", ".join(_placeholders(ATTEMPT_COLUMNS[1:], on_pg))
    columns = ", ".join(ATTEMPT_COLUMNS)
    if entry_cte:
        return f"INSERT INTO workflows_attempt ({columns}) SELECT {entry_cte}.id, {values} FROM {entry_cte}"
    return f"INSERT INTO workflows_attempt ({columns}) VALUES (%s, {values})"


def insert_entry(run: Any, write: EntryWrite, on_pg: bool, after: str = "") -> tuple[str, list[Any]]:
    """A new entry of `run` (`rid(...)`); `after` names a CTE the row hangs off (the one-statement
    commit's run update), so a fence that matched nothing inserts nothing."""
    params = [run, write.scope, write.position, write.name, write.kind, write.status, j(write.input),
              j(write.output), j(write.error), j(write.meta), write.attempts, t(write.started_at),
              t(write.finished_at), t(write.wake_at), False]  # fmt: skip
    return _insert_entry_sql(on_pg, after), params


def update_entry(write: EntryWrite, on_pg: bool, after: str = "") -> tuple[str, list[Any]]:
    """An entry moving on (a retry, a wait coming true); current entries only (the fence checked)."""
    params = [write.status, j(write.input), j(write.output), j(write.error), j(write.meta), write.attempts,
              t(write.finished_at), t(write.wake_at), write.id, False]  # fmt: skip
    return _update_entry_sql(on_pg, after), params


def insert_attempt(attempt: AttemptWrite, entry: int | str, on_pg: bool) -> tuple[str, list[Any]]:
    """The attempt of an entry: `entry` is its id, or the name of the CTE that wrote it."""
    row = [attempt.number, t(attempt.started_at), t(attempt.finished_at), attempt.outcome, j(attempt.error),
           attempt.delay, t(attempt.retry_at)]  # fmt: skip
    if isinstance(entry, str):
        return _insert_attempt_sql(on_pg, entry), row
    return _insert_attempt_sql(on_pg, ""), [entry, *row]


# --- a commit: events, messages, pruning --------------------------------------------------------------

EVENT_COLUMNS = "run_id, name, payload, created_at, scope, step, attempt, lost"
INSERT_EVENTS = f"INSERT INTO workflows_event ({EVENT_COLUMNS}) VALUES {{rows}}"
EVENT_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s)"
# Chunks running steps wrote to streams (`workflows.core.streams`).
CHUNK_COLUMNS = "run_id, stream, data, created_at, scope, step, attempt, seq"
INSERT_CHUNKS = f"INSERT INTO workflows_streamchunk ({CHUNK_COLUMNS}) VALUES {{rows}}"
CHUNK_ROW = "(%s, %s, %s, %s, %s, %s, %s, %s)"


# Step events whose attempt never recorded an outcome: their runner died, stopped mid-step or the
# store failed under it (run before the run executes again, so no attempt of it is running). A
# loop's pruned iterations have no entries left, so only scopes that still hold one are looked at.
MARK_LOST_EVENTS = (
    "UPDATE workflows_event SET lost = %s WHERE run_id = %s AND step <> '' AND NOT lost"
    " AND NOT EXISTS (SELECT 1 FROM workflows_entry e WHERE e.run_id = workflows_event.run_id"
    " AND e.scope = workflows_event.scope AND e.name = workflows_event.step"
    " AND (EXISTS (SELECT 1 FROM workflows_attempt a WHERE a.entry_id = e.id AND a.number = workflows_event.attempt)"
    # ... or its first attempt is implied: it completed at it, storing no attempt row
    # (`plain_commits.stored_attempt`)
    " OR (e.status = %s AND e.attempts = 1 AND workflows_event.attempt = 1)))"
    " AND (scope = '' OR EXISTS (SELECT 1 FROM workflows_entry s"
    " WHERE s.run_id = workflows_event.run_id AND s.scope = workflows_event.scope))"
    " RETURNING id, step, attempt"
)


EventRow = tuple[str, Any, str, str, int | None]  # name, payload, scope, step, attempt


def event_rows(commit: Commit) -> list[EventRow]:
    """Every event of a commit as (name, payload, scope, step, attempt)."""
    rows: list[EventRow] = [(name, payload, "", "", None) for name, payload in commit.events]
    rows += [(name, payload, o.scope, o.step, o.attempt) for name, payload, o in commit.live_events]
    return rows


# `by`: the consuming entry's id, a parameter or (in the one-statement commit) its CTE's, which
# also makes the update happen only when that entry was written.
CONSUME_MESSAGES = (
    "UPDATE workflows_message SET consumed_at = %s, consumed_by_id = {by}{complete}"
    " WHERE run_id = %s AND consumed_at IS NULL AND id IN ({ids}){guard}"
)
COMPLETE_MESSAGE = (
    "UPDATE workflows_message SET response = %s, completed_at = %s WHERE id = %s AND completed_at IS NULL"
)
MESSAGE_WAITING = "SELECT 1 FROM workflows_message WHERE run_id = %s AND consumed_at IS NULL"


@cache
def message_waiting(queues: int) -> str:
    """Whether a run has an unconsumed message on `queues` named queues (0: on any queue)."""
    of_queues = f" AND queue IN ({marks(queues)})" if queues else ""
    return f"{MESSAGE_WAITING}{of_queues} LIMIT 1"


WAKE_RUN = "UPDATE workflows_run SET wake_at = %s WHERE id = %s"
# Locks the target row (even when no wake is due), so a suspension racing with a send sees it. A
# message sent with a priority gives the run that priority (a start message's priority).
WAKE_FOR_MESSAGE = (
    "UPDATE workflows_run SET wake_at = CASE WHEN status IN (%s, %s) THEN %s ELSE wake_at END,"
    " priority = COALESCE(CAST(%s AS SMALLINT), priority)"
    " WHERE id = %s AND status IN (%s, %s, %s, %s)"  # TAKES_MESSAGES: a paused run reads it on resume
)
INSERT_MESSAGE = (
    "INSERT INTO workflows_message (run_id, queue, body, sent_at, trace_context) VALUES (%s, %s, %s, %s, %s)"
    " RETURNING id"
)
_SCOPE = "run_id = %s AND (scope = %s OR substr(scope, 1, %s) = %s)"
PRUNE_ATTEMPTS = (
    f"DELETE FROM workflows_attempt WHERE entry_id IN (SELECT id FROM workflows_entry WHERE {_SCOPE})"
)
PRUNE_CONSUMERS = (
    "UPDATE workflows_message SET consumed_by_id = NULL"
    f" WHERE consumed_by_id IN (SELECT id FROM workflows_entry WHERE {_SCOPE})"
)
PRUNE_ENTRIES = f"DELETE FROM workflows_entry WHERE {_SCOPE}"


def scope_params(run_id: str, scope: str) -> list[Any]:
    """A scope and every scope under it (`scope/...`)."""
    prefix = scope + "/"
    return [rid(run_id), scope, len(prefix), prefix]


# --- retention (`prune`) -----------------------------------------------------------------------------
# Children first, each given the batch's run ids; the table's name is what the report counts.
PRUNE_DELETES: tuple[tuple[str, str], ...] = (
    (
        "workflows_attempt",
        "DELETE FROM workflows_attempt WHERE entry_id IN"
        " (SELECT id FROM workflows_entry WHERE run_id IN ({ids}))",
    ),
    ("workflows_message", "DELETE FROM workflows_message WHERE run_id IN ({ids})"),
    (
        "",  # a message is consumed by an entry of its own run; never leave a dangling reference
        "UPDATE workflows_message SET consumed_by_id = NULL WHERE consumed_by_id IN"
        " (SELECT id FROM workflows_entry WHERE run_id IN ({ids}))",
    ),
    ("workflows_event", "DELETE FROM workflows_event WHERE run_id IN ({ids})"),
    ("workflows_streamchunk", "DELETE FROM workflows_streamchunk WHERE run_id IN ({ids})"),
    ("workflows_auditentry", "DELETE FROM workflows_auditentry WHERE run_id IN ({ids})"),
    ("workflows_entry", "DELETE FROM workflows_entry WHERE run_id IN ({ids})"),
    ("workflows_run", "DELETE FROM workflows_run WHERE id IN ({ids})"),
)
# A dry run's counts of what a prune would delete, per table, of the runs `{runs}` selects.
PRUNE_COUNTS = {
    "workflows_attempt": "SELECT COUNT(*) FROM workflows_attempt WHERE entry_id IN"
    " (SELECT id FROM workflows_entry WHERE run_id IN ({runs}))",
    "workflows_message": "SELECT COUNT(*) FROM workflows_message WHERE run_id IN ({runs})",
    "workflows_event": "SELECT COUNT(*) FROM workflows_event WHERE run_id IN ({runs})",
    "workflows_streamchunk": "SELECT COUNT(*) FROM workflows_streamchunk WHERE run_id IN ({runs})",
    "workflows_auditentry": "SELECT COUNT(*) FROM workflows_auditentry WHERE run_id IN ({runs})",
    "workflows_entry": "SELECT COUNT(*) FROM workflows_entry WHERE run_id IN ({runs})",
    "workflows_run": "SELECT COUNT(*) FROM workflows_run WHERE id IN ({runs})",
}
# Runs of a status finished before a cutoff (`{where}`: PRUNE_DUE, and no audit entry kept).
PRUNE_DUE = "r.status = %s AND r.created_at < %s AND r.finished_at < %s"
PRUNE_AUDITED = "SELECT 1 FROM workflows_auditentry a WHERE a.run_id = r.id"
PRUNE_RUNS = "SELECT r.id FROM workflows_run r WHERE {where}"
PRUNE_DUE_RUN_IDS = "SELECT r.id FROM workflows_run r WHERE {where} ORDER BY r.created_at LIMIT %s{lock}"
PRUNE_DUE_RUNS = (
    "SELECT r.id, r.workflow, r.status, r.finished_at FROM workflows_run r"
    " WHERE {where} ORDER BY r.created_at LIMIT %s"
)
