"""PostgreSQL: a group statement's plain step commits as rows of one fixed part.

Most commits under load are a step that succeeded at its first attempt, perhaps with the run's
new state, and nothing else (`is_plain`). In a group statement (`commit_statement.group_statement`)
each commit used to bring CTEs of its own, so the statement's text changed with how many commits of
which shapes met, and most texts were new: PostgreSQL parsed and planned each, and the client built
and sent a few dozen parameters per commit. Here every plain commit of a group is one row of ONE
JSON array (encoded in C by `json`), unpacked by `jsonb_to_recordset` into one fenced run update and
one entry insert. The part's text is fixed: prepared once, planned once, whatever the group holds.

Each row is still fenced by its own lease (the update's join matches only runs this owner holds
running), and an entry is inserted only for a run its update matched, so a lost lease loses that
commit only. A run has one commit in a group at most (`async_commits`), so the join updates a run
once. JSON null comes out of `jsonb_to_recordset` as SQL NULL, as `values.j(None)` is: the rows
store what a commit's own statement would.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ...core.exceptions import LeaseLost
from ...core.records import (
    AttemptWrite,
    Commit,
    CommitResult,
    EntryKind,
    EntryStatus,
    EntryWrite,
    Outcome,
    RunStatus,
)
from . import values
from .statements.pausing import HOLD

Pending = tuple[str, str, Commit, dt.datetime]  # run id, owner, commit, now (commit_statement's)

_ROWS = (
    "sp AS (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS x(n integer, run uuid, owner text,"
    " now timestamptz, state jsonb, scope text, position integer, name text, input jsonb,"
    " output jsonb, meta jsonb, started_at timestamptz, finished_at timestamptz))"
)
# The run update: only runs this owner holds running; a run with no new state keeps its own.
_RUNS = (
    "spr AS (UPDATE workflows_run SET updated_at = sp.now, state = COALESCE(sp.state, workflows_run.state)"
    " FROM sp WHERE workflows_run.id = sp.run AND workflows_run.lease_owner = sp.owner"
    " AND workflows_run.status = %s"
    " RETURNING sp.n, workflows_run.id,"
    f" CASE WHEN cancel_requested THEN 1 ELSE 0 END + CASE WHEN {HOLD} THEN 2 ELSE 0 END AS flags)"
)
# The entries: a plain step's kind, status and attempts are the same for all (see `is_plain`).
_ENTRIES = (
    "spe AS (INSERT INTO workflows_entry (run_id, scope, position, name, kind, status, input, output,"
    " error, meta, attempts, started_at, finished_at, wake_at, superseded)"
    " SELECT sp.run, sp.scope, sp.position, sp.name, %s, %s, sp.input, sp.output, NULL, sp.meta, 1,"
    " sp.started_at, sp.finished_at, NULL, FALSE FROM sp JOIN spr ON spr.n = sp.n RETURNING id, run_id)"
)
CTES = [_ROWS, _RUNS, _ENTRIES]
# What came of each row: (n, flags, entry id) for the runs whose fence matched.
SELECT = (
    "(SELECT COALESCE(json_agg(json_build_array(spr.n, spr.flags, spe.id)), '[]')"
    " FROM spr LEFT JOIN spe ON spe.run_id = spr.id)"
)
PARAMS = (RunStatus.RUNNING, EntryKind.STEP, EntryStatus.COMPLETED)


def is_plain(commit: Commit) -> bool:
    """One new step entry that succeeded at its first attempt (so no attempt row:
    `stored_attempt`), perhaps the run's new state, and nothing else."""
    if len(commit.entries) != 1 or commit.transition is not None:
        return False
    if commit.events or commit.live_events or commit.stream_chunks or commit.complete:
        return False
    if commit.messages or commit.children or commit.prune or commit.in_transaction is not None:
        return False
    write, attempt = commit.entries[0]
    if write.id is not None or write.kind != EntryKind.STEP or write.status != EntryStatus.COMPLETED:
        return False
    if write.attempts != 1 or write.error is not None or write.wake_at is not None or write.consumes:
        return False
    return attempt is None or stored_attempt(write, attempt) is None


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


def rows(commits: list[Pending]) -> str:
    """The plain commits as the JSON array `_ROWS` reads, n being each one's place in `commits`."""
    return json.dumps([_row(n, pending) for n, pending in enumerate(commits)])


def _row(n: int, pending: Pending) -> dict[str, Any]:
    run_id, owner, commit, now = pending
    write, _attempt = commit.entries[0]
    return {
        "n": n, "run": str(values.rid(run_id)), "owner": owner, "now": _iso(now), "state": commit.state,
        "scope": write.scope, "position": write.position, "name": write.name, "input": write.input,
        "output": write.output, "meta": write.meta, "started_at": _iso(write.started_at),
        "finished_at": _iso(write.finished_at),
    }  # fmt: skip


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def outcomes(commits: list[Pending], written: list[list[Any]]) -> list[CommitResult | LeaseLost]:
    """Each plain commit's outcome from SELECT's value: LeaseLost (returned) where no row came."""
    results: list[CommitResult | LeaseLost] = [
        LeaseLost(f"run {run_id} is no longer held by {owner}") for run_id, owner, _c, _now in commits
    ]
    for n, flags, entry_id in written:
        results[n] = CommitResult(
            entry_ids=[entry_id], cancel_requested=bool(flags & 1), hold=bool(flags & 2)
        )
    return results
