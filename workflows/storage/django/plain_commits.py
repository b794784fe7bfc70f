"""PostgreSQL: a group statement's plain commits as rows of one fixed part.

Most commits under load are plain (`is_plain`): a step that succeeded at its first attempt, or a
step's stream chunks, perhaps with the run's new state and events, and no transition, message or
child. In a group statement (`commit_statement.group_statement`) each commit used to bring CTEs
of its own, so the statement's text changed with how many commits of which shapes met, and most
texts were new: PostgreSQL parsed and planned each, and the client built and sent a few dozen
parameters per commit. Here a group's plain commits are rows of JSON arrays (encoded in C by
`json`), unpacked by `jsonb_to_recordset`: one fenced run update for all, then the entries, the
events and the chunks of the runs it matched. The text depends only on which of those three the
group has (eight texts at most): each is prepared once and planned once, whatever the group holds.

Each row is still fenced by its own lease (the update's join matches only runs this owner holds
running), and the rows hanging off a run are written only when its update matched, so a lost
lease loses that commit only. A run has one commit in a group at most (`async_commits`), so the
join updates a run once. Events and chunks are inserted in the order their commit gave (ids
follow it). JSON null comes out of `jsonb_to_recordset` as SQL NULL, as `values.j(None)` is: the
rows store what a commit's own statement would.
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
from .statements import postgres, shared
from .statements.pausing import HOLD
from .statements.shared import CHUNK_COLUMNS, EVENT_COLUMNS

Pending = tuple[str, str, Commit, dt.datetime]  # run id, owner, commit, now: a commit on its way

_RUNS = (
    "pr AS (SELECT * FROM jsonb_to_recordset(%s::jsonb) AS x(n integer, run uuid, owner text, now timestamptz,"
    " state jsonb, scope text, position integer, name text, input jsonb, output jsonb, meta jsonb,"
    " started_at timestamptz, finished_at timestamptz)),"
    # The run update: only runs this owner holds running; a run with no new state keeps its own.
    " pu AS (UPDATE workflows_run SET updated_at = pr.now, state = COALESCE(pr.state, workflows_run.state)"
    " FROM pr WHERE workflows_run.id = pr.run AND workflows_run.lease_owner = pr.owner"
    " AND workflows_run.status = %s RETURNING pr.n, pr.now, workflows_run.id,"
    f" {postgres.FLAGS.format(hold=HOLD)} AS flags)"
)
# The entries (rows with a name): a plain step's kind, status and attempts are the same for all.
_ENTRIES = (
    "pe AS (INSERT INTO workflows_entry (run_id, scope, position, name, kind, status, input, output,"
    " error, meta, attempts, started_at, finished_at, wake_at, superseded)"
    " SELECT pr.run, pr.scope, pr.position, pr.name, %s, %s, pr.input, pr.output, NULL, pr.meta, 1,"
    " pr.started_at, pr.finished_at, NULL, FALSE FROM pr JOIN pu ON pu.n = pr.n WHERE pr.name IS NOT NULL"
    " RETURNING id, run_id)"
)
_EVENTS = (
    f"pv AS (INSERT INTO workflows_event ({EVENT_COLUMNS})"
    " SELECT pu.id, x.name, x.payload, pu.now, x.scope, x.step, x.attempt, FALSE"
    " FROM jsonb_to_recordset(%s::jsonb) AS x(n integer, i integer, name text, payload jsonb, scope text,"
    " step text, attempt integer) JOIN pu ON pu.n = x.n ORDER BY x.n, x.i RETURNING id)"
)
_CHUNKS = (
    f"pc AS (INSERT INTO workflows_streamchunk ({CHUNK_COLUMNS})"
    " SELECT pu.id, x.stream, x.data, pu.now, x.scope, x.step, x.attempt, x.seq"
    " FROM jsonb_to_recordset(%s::jsonb) AS x(n integer, i integer, stream text, data jsonb, scope text,"
    " step text, attempt integer, seq integer) JOIN pu ON pu.n = x.n ORDER BY x.n, x.i RETURNING id)"
)
# What came of each row: (n, flags, entry id or null) for the runs whose fence matched.
SELECT = (
    "(SELECT COALESCE(json_agg(json_build_array(pu.n, pu.flags, pe.id)), '[]')"
    " FROM pu LEFT JOIN pe ON pe.run_id = pu.id)"
)
_NO_ENTRIES = "(SELECT COALESCE(json_agg(json_build_array(pu.n, pu.flags, NULL)), '[]') FROM pu)"


def is_plain(commit: Commit) -> bool:
    """At most one entry, a new step that succeeded at its first attempt (so no attempt row:
    `stored_attempt`); perhaps the run's new state, events and stream chunks; nothing else (no
    transition, message, child, wait or pruning)."""
    if len(commit.entries) > 1 or commit.transition is not None or commit.complete:
        return False
    if commit.messages or commit.children or commit.prune or commit.in_transaction is not None:
        return False
    if not commit.entries:
        return True
    write, attempt = commit.entries[0]
    if write.id is not None or write.kind != EntryKind.STEP or write.status != EntryStatus.COMPLETED:
        return False
    if write.attempts != 1 or write.error is not None or write.wake_at is not None or write.consumes:
        return False
    return attempt is None or stored_attempt(write, attempt) is None


def part(commits: list[Pending]) -> tuple[list[str], list[Any], str]:
    """The plain commits' CTEs, their parameters and the one value the statement selects for them
    (read by `outcomes`); row n is `commits[n]`."""
    runs: list[dict[str, Any]] = []
    events: list[dict[str, Any]] = []
    chunks: list[dict[str, Any]] = []
    for n, (run_id, owner, commit, now) in enumerate(commits):
        runs.append(_run_row(n, run_id, owner, commit, now))
        events += [
            {"n": n, "i": i, "name": name, "payload": payload, "scope": scope, "step": step, "attempt": attempt}
            for i, (name, payload, scope, step, attempt) in enumerate(shared.event_rows(commit))
        ]  # fmt: skip
        chunks += [
            {"n": n, "i": i, "stream": c.stream, "data": c.data, "scope": c.origin.scope, "step": c.origin.step,
             "attempt": c.origin.attempt, "seq": c.seq}
            for i, c in enumerate(commit.stream_chunks)
        ]  # fmt: skip
    ctes, params = [_RUNS], [json.dumps(runs), RunStatus.RUNNING]
    entries = any(commit.entries for _r, _o, commit, _n in commits)
    if entries:
        ctes.append(_ENTRIES)
        params += [EntryKind.STEP, EntryStatus.COMPLETED]
    for cte, rows in ((_EVENTS, events), (_CHUNKS, chunks)):
        if rows:
            ctes.append(cte)
            params.append(json.dumps(rows))
    return ctes, params, SELECT if entries else _NO_ENTRIES


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


def _run_row(n: int, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> dict[str, Any]:
    row = {"n": n, "run": str(values.rid(run_id)), "owner": owner, "now": _iso(now), "state": commit.state}
    if commit.entries:
        write, _attempt = commit.entries[0]
        row.update(
            scope=write.scope, position=write.position, name=write.name, input=write.input, output=write.output,
            meta=write.meta, started_at=_iso(write.started_at), finished_at=_iso(write.finished_at),
        )  # fmt: skip
    return row


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def outcomes(commits: list[Pending], written: list[list[Any]]) -> list[CommitResult | LeaseLost]:
    """Each plain commit's outcome from SELECT's value: LeaseLost (returned) where no row came."""
    results: list[CommitResult | LeaseLost] = [
        LeaseLost(f"run {run_id} is no longer held by {owner}") for run_id, owner, _c, _now in commits
    ]
    for n, flags, entry_id in written:
        results[n] = flagged(entry_id if commits[n][2].entries else None, flags)
    return results


def flagged(entry_id: int | None, flags: int) -> CommitResult:
    """A written commit's result from its entry id (None: it wrote none) and `postgres.FLAGS`."""
    return CommitResult(
        entry_ids=[] if entry_id is None else [entry_id],
        cancel_requested=bool(flags & 1),
        hold=bool(flags & 2),
    )
