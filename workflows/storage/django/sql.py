"""Every SQL statement the Django store writes with, named in one place, and the value adapters
they take. Statements hold `%s` placeholders (Django's cursor style) and are built from the same
column lists, so an entry is written by one path whichever commit carries it. On PostgreSQL the
placeholders are typed (`%s::jsonb`), since a statement like `INSERT ... SELECT %s FROM r` gives
its parameters no column to take a type from; SQLite needs no casts.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from functools import cache
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connection, connections

from ...core.records import LIVE, TERMINAL, AttemptWrite, Commit, EntryWrite, RunStatus
from ...models import Run

NOTIFY = "SELECT pg_notify(%s, '')"
SELECT_RUN = "SELECT {columns} FROM workflows_run WHERE id = %s"
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


# --- value adapters ---------------------------------------------------------------------------------


# A commit adapts a dozen values; through `connection.ops` each costs a lookup of this thread's
# connection (asgiref's Local) before the adapter runs, about a tenth of a step's commit on SQLite.
# The adapters below give the same values as Django's for what the engine passes (UTC datetimes,
# run ids as text, JSON values) and leave anything else to Django.


@cache
def _backend() -> tuple[bool, bool]:
    """(on PostgreSQL, SQLite keeping UTC text): fixed for the process by DATABASES."""
    wrapper = connections[DEFAULT_DB_ALIAS]
    on_pg = wrapper.vendor == "postgresql"
    utc_text = (
        wrapper.vendor == "sqlite" and settings.USE_TZ and wrapper.settings_dict.get("TIME_ZONE") is None
    )
    return on_pg, utc_text


def pg() -> bool:
    return _backend()[0]


def t(value: dt.datetime | None) -> Any:
    """A datetime as the backend takes it: itself on PostgreSQL; on SQLite (USE_TZ, the database
    in UTC) the naive UTC text Django writes (`make_naive`, then `str`)."""
    if value is None:
        return None
    on_pg, utc_text = _backend()
    if value.tzinfo is dt.UTC:
        if on_pg:
            return value
        if utc_text:
            return str(value.replace(tzinfo=None))
    return connection.ops.adapt_datetimefield_value(value)


def j(value: Any) -> Any:
    """A JSON value as the backend takes it (Django's `adapt_json_value` with no encoder)."""
    if value is None:
        return None
    if not _backend()[0]:
        return json.dumps(value)
    return connection.ops.adapt_json_value(value, None)


def rid(run_id: str) -> Any:
    """A run id as the backend stores it (a uuid on PostgreSQL, hex text on SQLite)."""
    if isinstance(run_id, str):
        try:
            value = uuid.UUID(run_id)
        except ValueError:  # Django's error for it
            return Run._meta.pk.get_db_prep_value(run_id, connection)
        return value if _backend()[0] else value.hex
    return Run._meta.pk.get_db_prep_value(run_id, connection)


def marks(n: int) -> str:
    return ", ".join(["%s"] * n)


def _typed(kind: str, on_pg: bool) -> str:
    return f"%s::{kind}" if on_pg else "%s"


# --- claims and leases ---------------------------------------------------------------------------------

_WAS = "started_at AS was_started, status AS was_status, lease_owner AS was_owner, wake_at AS was_due"
CLAIM_ORDER = "priority DESC, wake_at, id"  # higher priority first, FIFO within one (the claim index)
CLAIM_DUE = (
    f"SELECT id AS claim_id, {_WAS} FROM workflows_run WHERE wake_at <= %s"
    f" AND status IN (%s, %s, %s) AND workflow IN ({{names}}) ORDER BY {CLAIM_ORDER} LIMIT %s"
)
# PostgreSQL: the pick's plan is made once per connection. Left to choose, PostgreSQL plans it
# anew at every claim (each bind plans it: the generic plan's estimate looks dearer, though it runs
# faster); sent just before the claim in one pipeline, in the claim's own transaction, this makes
# it keep the generic plan, for that transaction only.
GENERIC_PLAN = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"
# PostgreSQL: the same pick, read per workflow. The claim index (workflow, priority, wake_at, id)
# yields claim order within one workflow only: ORDER BY over `workflow IN (...)` read and sorted
# every due run of those workflows at every claim, so a claim cost grew with the backlog. Here each
# workflow's index scan locks its first n runs in claim order, skipping those another claim holds
# (SKIP LOCKED: so it never comes back short while more are due, and FOR UPDATE rechecks a row
# another claim changed since the snapshot); the first n of those are taken, and the rest of the
# locks end with the statement. n is written into the text (a prepared statement per claim size):
# a generic plan then knows how few rows come out, and joins them to the update by primary key.
_PICKED = "id, started_at, status, lease_owner, wake_at, priority"  # what _WAS and CLAIM_ORDER read
CLAIM_DUE_PG = (
    f"SELECT id AS claim_id, {_WAS} FROM unnest(%s::text[]) AS names (name) CROSS JOIN LATERAL"
    f" (SELECT {_PICKED} FROM workflows_run"
    " WHERE workflow = names.name AND wake_at <= %s AND status IN (%s, %s, %s)"
    f" ORDER BY {CLAIM_ORDER} LIMIT {{limit:d}} FOR UPDATE SKIP LOCKED) AS c"
    f" ORDER BY {CLAIM_ORDER} LIMIT {{limit:d}}"
)
# SQLite: the same, one ordered read per workflow (`UNION ALL` of each workflow's first n, in
# claim order), then the first n of those: no sort of the whole backlog either (writers are
# serialised: nothing to lock or skip). Up to SQLITE_PER_WORKFLOW_MAX workflows (SQLite caps a
# compound SELECT at 500 parts); beyond, CLAIM_DUE.
_CLAIM_ONE_WORKFLOW = (
    f"SELECT * FROM (SELECT {_PICKED} FROM workflows_run"
    f" WHERE workflow = %s AND wake_at <= %s AND status IN (%s, %s, %s) ORDER BY {CLAIM_ORDER} LIMIT %s)"
)
CLAIM_DUE_SQLITE = f"SELECT id AS claim_id, {_WAS} FROM ({{parts}}) ORDER BY {CLAIM_ORDER} LIMIT %s"
SQLITE_PER_WORKFLOW_MAX = 100
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
    " AND (r.cancel_requested OR NOT EXISTS (SELECT 1 FROM busy JOIN caps ON caps.workflow = r.workflow"
    " WHERE busy.g = r.concurrency_group AND busy.n >= caps.cap))"
    f" ORDER BY {CLAIM_ORDER} LIMIT %s),"
    " ranked AS (SELECT due.id, due.workflow, due.g,"
    " ROW_NUMBER() OVER (PARTITION BY due.g ORDER BY due.priority DESC, due.wake_at, due.id) AS nth FROM due),"
    " admitted AS (SELECT ranked.id FROM ranked JOIN caps ON caps.workflow = ranked.workflow"
    " LEFT JOIN busy ON busy.g = ranked.g WHERE ranked.g IS NULL OR ranked.nth + COALESCE(busy.n, 0) <= caps.cap)"
    f" SELECT id AS claim_id, {_WAS} FROM workflows_run WHERE id IN (SELECT id FROM admitted)"
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
_FIRST_HELD = (
    "SELECT h.id FROM workflows_run h WHERE h.concurrency_group = {group} AND h.held_at IS NOT NULL"
    " AND h.wake_at IS NULL AND h.status IN (%s, %s, %s)"
    " ORDER BY h.priority DESC, h.held_at, h.id LIMIT 1{lock}"
)
UNPARK = (
    "UPDATE workflows_run SET wake_at = held_at, held_at = NULL WHERE held_at IS NOT NULL AND wake_at IS NULL"
    " AND id IN ({first})"
)
UNPARK_PG = (  # the first held run picked and locked ONCE: a locking subquery in the UPDATE could
    # be run again per row, skipping the rows this statement already updated and taking the next
    "WITH first AS MATERIALIZED ({first}) UPDATE workflows_run SET wake_at = held_at, held_at = NULL"
    " WHERE held_at IS NOT NULL AND wake_at IS NULL AND id IN (SELECT id FROM first)"
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


def unpark(group: str | None = None, after: str = "") -> tuple[str, list[Any]]:
    """UNPARK of `group`'s first held run; with `after` (PostgreSQL's one-statement commit), of
    the group of the run that CTE updated (`after.concurrency_group`)."""
    on_pg = pg()
    where = f"(SELECT {after}.concurrency_group FROM {after})" if after else "%s"
    first = _FIRST_HELD.format(group=where, lock=" FOR UPDATE SKIP LOCKED" if on_pg else "")
    params: list[Any] = [] if after else [group]
    return (UNPARK_PG if on_pg else UNPARK).format(first=first), [*params, *LIVE]


def park_held(caps: dict[str, int], now: dt.datetime) -> tuple[str, list[Any]]:
    names = list(caps)
    statement = PARK_HELD.format(
        caps=", ".join(["(%s, CAST(%s AS INTEGER))"] * len(names)), names=marks(len(names))
    )
    params: list[Any] = [v for name in names for v in (name, caps[name])]
    return statement, [*params, RunStatus.RUNNING, t(now), *names, t(now), *LIVE, *names]


# PostgreSQL: one claim of grouped runs per workflow at a time, across every runner (released when
# the claim's transaction ends). Taken in name order, so two runners never wait on each other.
GROUP_LOCK_SPACE = 0x57464C57  # "WFLW": this project's advisory locks, apart from others'
GROUP_LOCK = (
    "SELECT pg_advisory_xact_lock(%s, hashtext(w))::text"
    " FROM (SELECT w FROM unnest(%s::text[]) AS w ORDER BY w) AS names"
)
# PostgreSQL: what the runs a claim took that ran before need to resume (their history, their
# unconsumed messages), read in the claim's own pipeline and transaction, right after it, so a run
# woken by a message pays one round trip before its first step, not two. The runs this claim
# leased are those it left under this owner with its lease's expiry (an exact timestamp, indexed).
# Every one of them is read, fresh or not: which ran before is not told by comparing its first
# start with the claim's `now` (a claimant whose clock is behind the first start's, or a clock
# that stands still, read no history for a run that had one and replayed it from nothing). A
# fresh run's read finds no entries; the caller keeps what it read for the runs that ran before.
_CLAIMED_BEFORE = "SELECT id FROM workflows_run WHERE wake_at = %s AND lease_owner = %s AND status = %s"

CLAIMED_HISTORY = (
    f"SELECT run_id, {{columns}} FROM workflows_entry WHERE run_id IN ({_CLAIMED_BEFORE}) AND NOT superseded"
    " ORDER BY run_id, scope, position"
)
CLAIMED_MESSAGES = (
    f"SELECT m.* FROM ({_CLAIMED_BEFORE}) AS claimed CROSS JOIN LATERAL (SELECT {{columns}}"
    " FROM workflows_message WHERE run_id = claimed.id AND consumed_at IS NULL ORDER BY id LIMIT %s) AS m"
)
# PostgreSQL: the claim's transaction does not wait for its WAL to reach disk (a lease is the one
# write whose loss is harmless). If the server crashes first, the claim is undone as if never
# made: the run is claimable again, and the claimant's next commit of that run fails its lease
# fence. Anything the claimant commits later waits for its own WAL, and the WAL is flushed in
# order, so no durable commit can rest on a lost claim, and a run claimed `fresh` has no history.
# Saves one disk flush per claim (the longest wait of an idle claim on a real disk).
LAZY_FLUSH = "(SELECT set_config('synchronous_commit', 'off', true)) AS lazy_flush"
CLAIM_LEASE = (
    "UPDATE workflows_run SET status = %s, lease_owner = %s, wake_at = %s, updated_at = %s, transitioned_at = %s,"
    " started_at = COALESCE(workflows_run.started_at, %s), held_at = NULL"
)
HEARTBEAT = (  # held_at: a lapsed run set aside while its runner was only slow is its own again
    "UPDATE workflows_run SET wake_at = %s, held_at = NULL WHERE lease_owner = %s AND status = %s"
    " AND id IN ({ids}) RETURNING id, cancel_requested"
)
# PostgreSQL: the same, but rows locked by a write in flight are skipped (and renewed one at a
# time after). A statement updating several rows holds each one's lock until it ends; the runner's
# grouped step commit (another connection) locks several of the same rows in an order of its own,
# so a heartbeat that waited for one row while holding another could deadlock with it, and
# PostgreSQL would fail one of the two (a failed step commit runs its step again).
HEARTBEAT_SKIP_LOCKED = (
    "UPDATE workflows_run SET wake_at = %s, held_at = NULL WHERE id IN (SELECT id FROM workflows_run"
    " WHERE lease_owner = %s AND status = %s AND id IN ({ids}) FOR UPDATE SKIP LOCKED)"
    " RETURNING id, cancel_requested"
)


def claim_due(workflows: list[str], limit: int, now: dt.datetime) -> tuple[str, list[Any]]:
    """The pick of due runs of ungrouped workflows, row-locking on PostgreSQL."""
    if pg():
        return CLAIM_DUE_PG.format(limit=limit), [list(workflows), t(now), *LIVE]
    if 1 < len(workflows) <= SQLITE_PER_WORKFLOW_MAX:
        parts = " UNION ALL ".join([_CLAIM_ONE_WORKFLOW] * len(workflows))
        params = [v for name in workflows for v in (name, t(now), *LIVE, limit)]
        return CLAIM_DUE_SQLITE.format(parts=parts), [*params, limit]
    return CLAIM_DUE.format(names=marks(len(workflows))), [t(now), *LIVE, *workflows, limit]


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


# --- starting a run -------------------------------------------------------------------------------
# Both return one column, and a row only when they inserted: the caller already holds every value
# of the new run (`writes.NewRun`), so nothing is read back on a start's hot path.

_NEW_RUN = (
    "WITH new AS (INSERT INTO workflows_run (id, workflow, key, key_text, key_hash, version, status, state,"
    " created_at, updated_at, transitioned_at, wake_at, lease_owner, cancel_requested, epoch, trace_context,"
    " priority, concurrency_group)"
    " VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, '', FALSE, 0, %s::jsonb, %s, %s)"
    " ON CONFLICT (workflow, key_hash) DO NOTHING RETURNING id)"
)
INSERT_RUN_IF_NEW = _NEW_RUN + " SELECT pg_notify(%s, '')::text FROM new"
# ... with its first message (a start message: `get_or_create(message=...)`), stored only when the
# run is new, in the same statement: no run is ever seen without it.
INSERT_RUN_WITH_MESSAGE_IF_NEW = (
    _NEW_RUN + ", sent AS (INSERT INTO workflows_message (run_id, queue, body, sent_at, trace_context)"
    " SELECT id, %s, %s::jsonb, %s, %s::jsonb FROM new RETURNING id)"
    " SELECT pg_notify(%s, '')::text FROM sent"
)
# PostgreSQL: a new run already leased to the runner that starts it (`Runner.start`): it runs in
# that process at once, so no claim follows and no other runner is woken (no NOTIFY).
INSERT_HELD_RUN_IF_NEW = (
    "INSERT INTO workflows_run (id, workflow, key, key_text, key_hash, version, status, state,"
    " created_at, updated_at, transitioned_at, started_at, wake_at, lease_owner, cancel_requested, epoch,"
    " trace_context, priority, concurrency_group)"
    " VALUES (%s, %s, %s::jsonb, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s, %s, %s, FALSE, 0, %s::jsonb, %s, NULL)"
    " ON CONFLICT (workflow, key_hash) DO NOTHING RETURNING id"
)


# --- a commit: the fenced run update ----------------------------------------------------------------


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
    if transition is not None:  # only a transition moves an indexed column (see Run.transitioned_at)
        sets += ["status = %s", "transitioned_at = %s", "held_at = NULL"]
        params += [transition.status, t(now)]
        if transition.status in TERMINAL:
            sets += ["wake_at = NULL", "lease_owner = ''", "finished_at = %s", "result = %s", "error = %s"]
            params += [t(now), j(transition.result), j(transition.error)]
        else:  # waiting, or released (pending)
            sets += ["wake_at = %s", "lease_owner = ''"]
            params.append(t(transition.wake_at))
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
INSERT_EVENTS_AFTER = (
    f"INSERT INTO workflows_event ({EVENT_COLUMNS})"
    " SELECT %s, x.name, x.payload, %s::timestamptz, x.scope, x.step, x.attempt, FALSE"
    " FROM (VALUES {rows}) AS x(name, payload, scope, step, attempt)"
    " WHERE EXISTS (SELECT 1 FROM {after})"
)
EVENT_ROW_AFTER = "(%s, %s::jsonb, %s, %s, %s::integer)"
# Step events whose attempt never recorded an outcome: their runner died, stopped mid-step or the
# store failed under it (run before the run executes again, so no attempt of it is running). A
# loop's pruned iterations have no entries left, so only scopes that still hold one are looked at.
MARK_LOST_EVENTS = (
    "UPDATE workflows_event SET lost = %s WHERE run_id = %s AND step <> '' AND NOT lost"
    " AND NOT EXISTS (SELECT 1 FROM workflows_entry e WHERE e.run_id = workflows_event.run_id"
    " AND e.scope = workflows_event.scope AND e.name = workflows_event.step"
    " AND (EXISTS (SELECT 1 FROM workflows_attempt a WHERE a.entry_id = e.id AND a.number = workflows_event.attempt)"
    # ... or its first attempt is implied: it completed at it, storing no attempt row
    # (`writes.stored_attempt`)
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
# How many of a run's messages named by id are still unconsumed (the one-statement commit's fence).
COUNT_CONSUMABLE = (
    "SELECT COUNT(*) FROM workflows_message WHERE run_id = %s AND consumed_at IS NULL AND id IN ({ids})"
)
COMPLETE_MESSAGE = (
    "UPDATE workflows_message SET response = %s, completed_at = %s WHERE id = %s AND completed_at IS NULL"
)
MESSAGE_WAITING = "SELECT 1 FROM workflows_message WHERE run_id = %s AND consumed_at IS NULL"
WAKE_RUN = "UPDATE workflows_run SET wake_at = %s WHERE id = %s"
# Locks the target row (even when no wake is due), so a suspension racing with a send sees it. A
# message sent with a priority gives the run that priority (a start message's priority).
WAKE_FOR_MESSAGE = (
    "UPDATE workflows_run SET wake_at = CASE WHEN status IN (%s, %s) THEN %s ELSE wake_at END,"
    " priority = COALESCE(CAST(%s AS SMALLINT), priority)"
    " WHERE id = %s AND status IN (%s, %s, %s)"
)
INSERT_MESSAGE = (
    "INSERT INTO workflows_message (run_id, queue, body, sent_at, trace_context) VALUES (%s, %s, %s, %s, %s)"
    " RETURNING id"
)
# PostgreSQL, a message to a run by id: wake the run (it locks the row, so a suspension racing with
# the send sees the message), store the message and notify, in one statement. No row: the run is
# missing or finished (the caller looks which).
SEND_TO_RUN = (
    "WITH target AS (" + WAKE_FOR_MESSAGE + " RETURNING id),"
    " sent AS (INSERT INTO workflows_message (run_id, queue, body, sent_at, trace_context)"
    " SELECT id, %s, %s::jsonb, %s, %s::jsonb FROM target RETURNING id)"
    " SELECT id, pg_notify(%s, '')::text FROM sent"
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
