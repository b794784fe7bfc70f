"""A runner's step commits sent from its event loop on psycopg's async connection.

Every step ends in one commit statement (`commit_statement.one_statement`). Through a database thread it
costs a hop to the thread and back and Django's cursor layers on top of the round trip; sent from
the event loop on a psycopg `AsyncConnection` of the store's own, it costs the round trip alone
(`bench/hot_path.py` measures both), sent and awaited on libpq by hand (`lean_statement`: psycopg's
async cursor added 0.07-0.10 ms to each round trip). The rest of the store (claims, reads, the commits that
need several statements) stays on the database threads.

Group commit comes with it. One statement is in flight at a time; the commits made ready
meanwhile queue, and the next statement takes them all (up to MAX_BATCH; `commit_statement.group_statement`,
each run's writes fenced by its own lease): one round trip, one transaction, one WAL flush. Nothing
waits to fill a batch: a lone commit goes out at the end of the loop's turn. A statement carries
at most one run's end or suspension (a transition): it may free a concurrency-group slot and put
the group's next run back in line, and two such unparks in one statement would pick the same run.

Failures are said as the thread path says them. A statement PostgreSQL failed to break a deadlock
was rolled back whole: it is sent again (a few times). The connection failing, a timeout
(psycopg's OperationalError, InterfaceError): every waiter of that statement gets StoreUnavailable
and nothing is sent again (whether it landed is unknown: the engine re-reads the run's history);
the connection is dropped and the next commit opens a new one. The server refusing a statement (a
broken constraint; a value psycopg cannot send) wrote nothing: each of its commits is sent again
alone through the thread path, which raises the same Django errors a runner without this path
raises. Written by hand: this is the engine's commit protocol, which no library knows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ...core.exceptions import StoreUnavailable
from ...core.records import Commit, CommitResult
from . import commit_statement
from .group_commit import settle
from .lean_statement import LeanStatements
from .loop_connection import LoopConnection
from .reconnect import RACE_RETRIES, lost_a_race, race_backoff

logger = logging.getLogger(__name__)

MAX_BATCH = 32  # commits per statement: bounds its size (about 30 parameters each)
GROUP_TEXTS_KEPT = 4096  # group statement texts remembered (by hash) to prepare the ones that recur


@dataclass
class _Queued:
    pending: commit_statement.Pending
    future: asyncio.Future[CommitResult]


class AsyncCommits:
    """The store's async commit path (one per store; its connection lives in one event loop)."""

    def __init__(
        self,
        *,
        connect: Callable[[], Awaitable[Any]],
        alone: Callable[[commit_statement.Pending], Awaitable[CommitResult]],
        group: bool = True,
    ) -> None:
        self.connection = LoopConnection(connect)  # `PostgresLoop._loop_connection` opens it
        self._alone = alone  # the same commit through a database thread (Django's errors)
        self._max_batch = MAX_BATCH if group else 1
        self._queue: deque[_Queued] = deque()
        self._writer: asyncio.Task[None] | None = None
        self._closed = False
        self.largest_batch = 0  # the most commits one statement carried (tests, benchmarks)
        self.commits = 0  # commits written through this path
        self.statements = 0  # ... in this many statements
        self.races_lost = 0  # statements PostgreSQL failed to break a deadlock, sent again
        self._group_texts: set[int] = set()
        self._lean: LeanStatements | None = None  # the current connection's, sent by hand

    def accepts(self, commit: Commit) -> bool:
        return commit_statement.fits_one_statement(commit)

    async def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        if self._closed:
            raise StoreUnavailable("the store is closed")
        loop = asyncio.get_running_loop()
        queued = _Queued((run_id, owner, commit, now), loop.create_future())
        self._queue.append(queued)
        if self._writer is None or self._writer.get_loop() is not loop:
            self._writer = loop.create_task(self._write_queued())  # starts after this turn
        return await queued.future

    def close(self) -> None:
        """The stopping store's: no more commits; the connection closed without its loop (which
        may be gone already: `runworkflows` closes the store after its loop ended)."""
        self._closed = True
        self.connection.forget()

    async def _write_queued(self) -> None:
        batch: list[_Queued] = []
        try:
            while self._queue:
                batch = self._take()
                outcomes = await self._write(batch)
                for queued, outcome in zip(batch, outcomes, strict=True):
                    settle(queued.future, outcome)
                batch = []
        except BaseException as exc:  # cancelled (a loop closing), or a bug of ours: no waiter hangs
            failure = StoreUnavailable(f"the commit was not written: {exc!r}")
            for queued in [*batch, *self._queue]:
                settle(queued.future, failure)
            self._queue.clear()
            raise
        finally:
            self._writer = None

    def _take(self) -> list[_Queued]:
        """The next statement's commits: the queued ones, with at most one transition among them
        (the others wait for the next statement; a run has one commit queued at most, so runs'
        commits may go in any order)."""
        batch: list[_Queued] = []
        passed_over: list[_Queued] = []
        transition = False
        while self._queue and len(batch) < self._max_batch:
            queued = self._queue.popleft()
            if queued.pending[2].transition is not None:
                if transition:
                    passed_over.append(queued)
                    continue
                transition = True
            batch.append(queued)
        self._queue.extendleft(reversed(passed_over))
        return batch

    async def _write(self, batch: list[_Queued]) -> list[CommitResult | BaseException]:
        import psycopg

        pending = [queued.pending for queued in batch]
        try:
            if len(pending) == 1:
                text, params = commit_statement.one_statement(*pending[0])
            else:
                text, params, layout = commit_statement.group_statement(pending)
            conn = await self.connection.get()
            self.statements += 1
            self.commits += len(batch)
            self.largest_batch = max(self.largest_batch, len(batch))
            row = await self._execute(conn, text, params, self._worth_preparing(text, len(pending)))
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            self.connection.forget()
            return [StoreUnavailable(f"the database failed: {exc}".strip())] * len(batch)
        except (psycopg.Error, ValueError, TypeError):  # refused, by the server or before it: nothing
            # was written; each alone through the thread path, so its own error is its own (Django's)
            return [await self._write_alone(p) for p in pending]
        if len(pending) == 1:
            return [commit_statement.outcome(*pending[0][:3], row)]
        return list(commit_statement.group_outcomes(pending, layout, row))

    def _worth_preparing(self, text: str, commits: int) -> bool:
        """A run's own commit statement recurs (one text per shape): prepared at once. A group of
        plain commits is one of a few texts whatever their number (`plain_commits`); a group with
        others recurs only when the same shapes meet again: prepared when it comes again, so texts
        sent once do not push the recurring ones out of the prepared statements a connection keeps
        (`lean_statement.PREPARED_MAX`: a Close for each pushed out, a PREPARE for each return)."""
        if commits == 1:
            return True
        key = hash(text)
        if key in self._group_texts:
            return True
        if len(self._group_texts) >= GROUP_TEXTS_KEPT:
            self._group_texts.clear()
        self._group_texts.add(key)
        return False

    async def _execute(self, conn: Any, text: str, params: list[Any], prepare: bool) -> Any:
        """The statement's row; sent again when PostgreSQL failed it to break a deadlock (it was
        rolled back whole: failing its commits would run their steps again)."""
        if self._lean is None or self._lean.conn is not conn:
            self._lean = LeanStatements(conn)
        for attempt in range(RACE_RETRIES + 1):
            try:
                # `prepare` is moot on a connection that prepares nothing (PREPARED_STATEMENTS off)
                return await self._lean.fetchone(text, params, prepare=prepare)
            except Exception as exc:
                if attempt == RACE_RETRIES or not lost_a_race(exc):
                    raise
                self.races_lost += 1
                logger.info("step commits lost a race in the database; sent again: %s", exc)
                await asyncio.sleep(race_backoff(attempt))
        raise AssertionError("unreachable")

    async def _write_alone(self, pending: commit_statement.Pending) -> CommitResult | BaseException:
        try:
            return await self._alone(pending)
        except Exception as exc:  # LeaseLost, StoreUnavailable, a constraint: the waiter's to raise
            return exc
