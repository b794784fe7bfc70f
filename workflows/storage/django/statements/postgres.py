"""The statements only PostgreSQL runs: one-statement starts, sends and commits, the claim's
row-locking pick and its pipeline's reads, advisory locks, NOTIFY."""

from __future__ import annotations

from .shared import CHUNK_COLUMNS, CLAIM_ORDER, EVENT_COLUMNS, NOT_PAUSED, PICKED, WAKE_FOR_MESSAGE, WAS

NOTIFY = "SELECT pg_notify(%s, '')"
# PostgreSQL: the pick's plan is made once per connection. Left to choose, PostgreSQL plans it
# anew at every claim (each bind plans it: the generic plan's estimate looks dearer, though it runs
# faster); sent just before the claim in one pipeline, in the claim's own transaction, this makes
# it keep the generic plan, for that transaction only.
GENERIC_PLAN = "SELECT set_config('plan_cache_mode', 'force_generic_plan', true)"
CLAIM_DUE_PG = (
    f"SELECT id AS claim_id, {WAS} FROM (SELECT n.name FROM unnest(%s::text[]) AS n (name)"
    f" WHERE {NOT_PAUSED.format(name='n.name')}) AS names CROSS JOIN LATERAL"
    f" (SELECT {PICKED} FROM workflows_run"
    " WHERE workflow = names.name AND wake_at <= %s AND status IN (%s, %s, %s)"
    f" ORDER BY {CLAIM_ORDER} LIMIT {{limit:d}} FOR UPDATE SKIP LOCKED) AS c"
    f" ORDER BY {CLAIM_ORDER} LIMIT {{limit:d}}"
)
UNPARK_PG = (  # the first held run picked and locked ONCE: a locking subquery in the UPDATE could
    # be run again per row, skipping the rows this statement already updated and taking the next
    "WITH first AS MATERIALIZED ({first}) UPDATE workflows_run SET wake_at = held_at, held_at = NULL"
    " WHERE held_at IS NOT NULL AND wake_at IS NULL AND id IN (SELECT id FROM first)"
)


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


# --- starting a run -------------------------------------------------------------------------------
# Both return one column, and a row only when they inserted: the caller already holds every value
# of the new run (`starts.NewRunStatement`), so nothing is read back on a start's hot path.

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
INSERT_EVENTS_AFTER = (
    f"INSERT INTO workflows_event ({EVENT_COLUMNS})"
    " SELECT %s, x.name, x.payload, %s::timestamptz, x.scope, x.step, x.attempt, FALSE"
    " FROM (VALUES {rows}) AS x(name, payload, scope, step, attempt)"
    " WHERE EXISTS (SELECT 1 FROM {after})"
)
EVENT_ROW_AFTER = "(%s, %s::jsonb, %s, %s, %s::integer)"
# A commit's stream chunks as one JSON array of rows (in order): one statement text whatever their
# number.
INSERT_CHUNKS_AFTER = (
    f"INSERT INTO workflows_streamchunk ({CHUNK_COLUMNS})"
    " SELECT %s, x.stream, x.data, %s::timestamptz, x.scope, x.step, x.attempt, x.seq"
    " FROM jsonb_to_recordset(%s::jsonb)"
    " AS x(stream text, data jsonb, scope text, step text, attempt integer, seq integer)"
    " WHERE EXISTS (SELECT 1 FROM {after})"
)
# How many of a run's messages named by id are still unconsumed (the one-statement commit's fence).
COUNT_CONSUMABLE = (
    "SELECT COUNT(*) FROM workflows_message WHERE run_id = %s AND consumed_at IS NULL AND id IN ({ids})"
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

# The one pruner at a time (a session lock: it spans the prune's transactions).
PRUNE_LOCK = "SELECT pg_try_advisory_lock(%s)"
PRUNE_UNLOCK = "SELECT pg_advisory_unlock(%s)"

# --- a commit as one statement (`commit_statement`): its parts, named CTEs over the fenced update ---
ONE_STATEMENT = "WITH {ctes} SELECT {selects}"
CTE = "{name} AS ({statement})"
CTE_IDS = "{name} AS ({statement} RETURNING id)"
ID_OF = "(SELECT id FROM {cte})"
COUNT_OF = "(SELECT COUNT(*) FROM {cte})"
# A commit's flags, NULL when its fence matched nothing: 1 a cancel was requested, 2 hold (an
# operator paused the run or its workflow: `shared.HOLD`).
FLAGS = "CASE WHEN cancel_requested THEN 1 ELSE 0 END + CASE WHEN {hold} THEN 2 ELSE 0 END"
CANCEL_REQUESTED_OF = "(SELECT " + FLAGS.format(hold="hold") + " FROM {cte})"
IF_WRITTEN = " AND EXISTS (SELECT 1 FROM {cte})"
# The fence's addition for a wait's entry: every message it took is still there to take.
ALL_CONSUMABLE = " AND (" + COUNT_CONSUMABLE + ") = %s"
COMPLETE_CONSUMED = ", completed_at = COALESCE(completed_at, %s::timestamptz)"
# A grouped run leaving `running` frees its group's slot: runners waiting for one look.
SLOT_FREED_NOTIFY = (
    "{name} AS (SELECT pg_notify(%s, '')::text AS sent FROM {run} WHERE {run}.concurrency_group IS NOT NULL)"
)
