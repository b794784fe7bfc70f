"""PostgreSQL: the common commit (one entry and its attempt, state, events, a transition) as ONE
statement of data-modifying CTEs that all hang off the fenced run update, so a lost lease writes
nothing; a runner's grouped commits (`group_commit`, `async_commits`) put several in one."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from ...core.exceptions import LeaseLost
from ...core.records import (
    TERMINAL,
    Commit,
    CommitResult,
    RunStatus,
)
from . import plain_commits, statements, values
from .notify import NOTIFY_CHANNEL
from .plain_commits import Pending, flagged, stored_attempt
from .prepared import hot_cursor
from .statements import postgres, shared


def fits_one_statement(commit: Commit) -> bool:
    """The commits the one-statement path handles: at most one entry and its attempt (a wait's
    entry may consume messages, and complete them all when none is answered later), state, events
    and a transition that needs no message check."""
    if commit.messages or commit.children or commit.prune or len(commit.entries) > 1:
        return False
    if commit.in_transaction is not None:  # a transaction step's body runs on Django's connection
        return False
    consumes = set(commit.entries[0][0].consumes) if commit.entries else set()
    if commit.complete and ({mid for mid, _r in commit.complete} != consumes or _answered(commit)):
        return False
    transition = commit.transition
    return transition is None or transition.status != RunStatus.WAITING or transition.wait_queues is None


def commit_one_statement(run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
    text, params = one_statement(run_id, owner, commit, now)
    with hot_cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    result = outcome(run_id, owner, commit, row)
    if isinstance(result, LeaseLost):
        raise result
    return result


def one_statement(run_id: str, owner: str, commit: Commit, now: dt.datetime) -> tuple[str, list[Any]]:
    """A commit of the one-statement kind (`fits_one_statement`) as one statement and its parameters."""
    ctes, params, selects = _statement_parts(run_id, owner, commit, now)
    return postgres.ONE_STATEMENT.format(ctes=", ".join(ctes), selects=", ".join(selects)), params


def commit_group(commits: list[Pending]) -> list[CommitResult | LeaseLost]:
    """Several runs' commits, each of the one-statement kind (`fits_one_statement`), as ONE
    statement (`group_statement`): one round trip, one transaction, one WAL flush. A lost lease
    loses that commit only (its LeaseLost is returned, not raised). Any error (a constraint, a
    deadlock) rolls the whole statement back: nothing of it was written."""
    text, params, layout = group_statement(commits)
    with hot_cursor() as cursor:
        cursor.execute(text, params)
        row = cursor.fetchone()
    return group_outcomes(commits, layout, row)


Layout = tuple[list[int], list[int]]  # the group's plain commits, then the rest in order of shape


def group_statement(commits: list[Pending]) -> tuple[str, list[Any], Layout]:
    """The commits as one statement, its parameters, and where each commit's part is. Plain
    commits (a step's success, its stream chunks), two or more, go as rows of one fixed part
    (`plain_commits`); the rest bring CTEs of their own, each hanging off its own fenced run
    update, in order of shape, so that batches of the same shapes are the same text (one prepared
    statement each) whatever order their commits came in."""
    plain = [i for i, pending in enumerate(commits) if plain_commits.is_plain(pending[2])]
    if len(plain) < 2:
        plain = []
    chosen = set(plain)
    rest = sorted((i for i in range(len(commits)) if i not in chosen), key=lambda i: _shape(commits[i][2]))
    ctes: list[str] = []
    params: list[Any] = []
    selects: list[str] = []
    if plain:
        more_ctes, more_params, select = plain_commits.part([commits[i] for i in plain])
        ctes += more_ctes
        params += more_params
        selects.append(select)
    for n, i in enumerate(rest):
        run_id, owner, commit, now = commits[i]
        more_ctes, more_params, more_selects = _statement_parts(run_id, owner, commit, now, str(n))
        ctes += more_ctes
        params += more_params
        selects += more_selects
    text = postgres.ONE_STATEMENT.format(ctes=", ".join(ctes), selects=", ".join(selects))
    return text, params, (plain, rest)


def group_outcomes(commits: list[Pending], layout: Layout, row: Any) -> list[CommitResult | LeaseLost]:
    """Each commit's outcome, in the order the commits were given, from the group statement's row."""
    plain, rest = layout
    outcomes: list[CommitResult | LeaseLost] = [LeaseLost("not written")] * len(commits)
    if plain:
        written = plain_commits.outcomes([commits[i] for i in plain], row[0])
        for i, result in zip(plain, written, strict=True):
            outcomes[i] = result
        row = row[1:]
    for n, i in enumerate(rest):
        run_id, owner, commit, _now = commits[i]
        outcomes[i] = outcome(run_id, owner, commit, row[3 * n : 3 * n + 3])
    return outcomes


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
        bool(commit.stream_chunks),
        commit.transition is not None and commit.transition.status in TERMINAL,
        commit.transition is not None,
    )


def outcome(run_id: str, owner: str, commit: Commit, row: Any) -> CommitResult | LeaseLost:
    """What a statement's row (or its slice of a group's) says of a commit: LeaseLost returned, not raised."""
    flags, entry_id, _notified = row  # postgres.CANCEL_REQUESTED_OF
    if flags is None:
        return LeaseLost(f"run {run_id} is no longer held by {owner}, or its entry was replayed")
    return flagged(entry_id if commit.entries else None, flags)


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
        where += postgres.ALL_CONSUMABLE.format(ids=values.marks(len(consumes)))
        params += [rid, *consumes, len(consumes)]
    ctes = [postgres.CTE.format(name=r, statement=shared.FENCED_RUN_UPDATE.format(sets=sets, where=where))]
    entry_select = "NULL::bigint"
    if commit.entries:
        [(write, attempt)] = commit.entries
        attempt = stored_attempt(write, attempt)
        if write.id is None:
            statement, entry_params = shared.insert_entry(rid, write, on_pg=True, after=r)
        else:
            statement, entry_params = shared.update_entry(write, on_pg=True, after=r)
        ctes.append(postgres.CTE.format(name=e, statement=statement))
        params += entry_params
        entry_select = postgres.ID_OF.format(cte=e)
        if attempt is not None:
            statement, attempt_params = shared.insert_attempt(attempt, e, on_pg=True)
            ctes.append(postgres.CTE_IDS.format(name=f"a{n}", statement=statement))
            params += attempt_params
        if consumes:  # by the entry just written; completed too when the wait answers none
            complete = bool(commit.complete)
            statement = shared.CONSUME_MESSAGES.format(
                by=postgres.ID_OF.format(cte=e),
                complete=postgres.COMPLETE_CONSUMED if complete else "",
                ids=values.marks(len(consumes)),
                guard=postgres.IF_WRITTEN.format(cte=e),
            )
            ctes.append(postgres.CTE_IDS.format(name=f"c{n}", statement=statement))
            params += [values.t(now), *([values.t(now)] if complete else []), rid, *consumes]
    events = shared.event_rows(commit)
    if events:
        rows = ", ".join([postgres.EVENT_ROW_AFTER] * len(events))
        statement = postgres.INSERT_EVENTS_AFTER.format(rows=rows, after=r)
        ctes.append(postgres.CTE_IDS.format(name=f"v{n}", statement=statement))
        params += [rid, values.t(now)]
        for name, payload, scope, step, number in events:
            params += [name, values.j(payload), scope, step, number]
    if commit.stream_chunks:
        ctes.append(
            postgres.CTE_IDS.format(name=f"s{n}", statement=postgres.INSERT_CHUNKS_AFTER.format(after=r))
        )
        params += [rid, values.t(now), chunk_rows(commit)]
    slot_freed = "NULL"
    if commit.transition is not None:  # a grouped run leaving `running` frees its group's slot:
        # the first run set aside in the group is due again, and runners waiting for a slot look
        ctes.append(postgres.SLOT_FREED_NOTIFY.format(name=f"n{n}", run=r))
        params.append(NOTIFY_CHANNEL)
        statement, unpark_params = statements.unpark(after=r)
        ctes.append(postgres.CTE_IDS.format(name=f"u{n}", statement=statement))
        params += unpark_params
        slot_freed = postgres.COUNT_OF.format(cte=f"n{n}")
    return ctes, params, [postgres.CANCEL_REQUESTED_OF.format(cte=r), entry_select, slot_freed]


def chunk_rows(commit: Commit) -> str:
    """A commit's stream chunks as the JSON array of rows INSERT_CHUNKS_AFTER reads: one text
    however many chunks (one statement text), encoded in C by `json`. Six text arrays instead cost
    psycopg a regex search and an escape in Python per element (its `_dump_list` was among the
    costliest functions of `bench/job_cpu.py --top 40` on PostgreSQL: a model streams a chunk a
    word)."""
    return json.dumps(
        [
            {"stream": c.stream, "data": c.data, "scope": c.origin.scope, "step": c.origin.step,
             "attempt": c.origin.attempt, "seq": c.seq}
            for c in commit.stream_chunks
        ]
    )  # fmt: skip


def _answered(commit: Commit) -> bool:
    return any(response is not None for _mid, response in commit.complete)
