"""Group commit through the database threads: step commits of several runs that are ready at the
same moment go to PostgreSQL as one statement (`commit_statement.commit_group`): one round trip, one
transaction, one WAL flush, each run's writes still fenced by its own lease. This is the path of
the `PostgresThreads` connector (`connectors`); by default a runner sends its step commits from
its event loop (`async_commits`, `loop_connectors.PostgresLoop`), which groups them in its own way.

Nothing waits to fill a batch. A queued commit hands a job to the store's database threads at the
end of the event loop's turn (so commits made ready in the same turn join it) unless a job is
already waiting to start (that one will take it); a job takes every commit queued by the time a
thread runs it. So a lone commit (an idle runner) goes out as before, with no added latency,
while a busy runner, whose threads are all writing, sends the commits that queued up meanwhile
together, and pays one thread hop per statement rather than per commit.

Only the common commit is grouped: one step's entry and attempt, state and events, no transition
(run ends and suspensions free concurrency-group slots, which must not share a statement). If the
server refuses the grouped statement (a constraint an entry breaks), or fails it to break a
deadlock, nothing of it was written and each commit is sent again alone, so one run's failure
never becomes another's; when the connection fails under it (its outcome unknown to us), every
waiter gets StoreUnavailable, as a lone commit would, and re-reads its history. Written by hand: this is the
engine's commit protocol, which no library knows.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.db import InterfaceError, OperationalError

from ...core.exceptions import StoreUnavailable
from ...core.records import Commit, CommitResult
from . import commit_statement
from .reconnect import lost_a_race, reconnecting, unavailable

MAX_BATCH = 32  # commits per statement: bounds its size (about 30 parameters each)


def groupable(commit: Commit) -> bool:
    return commit.transition is None and commit_statement.fits_one_statement(commit)


@dataclass
class _Queued:
    run_id: str
    owner: str
    commit: Commit
    now: dt.datetime
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[CommitResult]

    def settle(self, outcome: CommitResult | BaseException) -> None:
        """From a database thread: hand the outcome to the waiting coroutine."""
        self.loop.call_soon_threadsafe(settle, self.future, outcome)


def settle(future: asyncio.Future[CommitResult], outcome: CommitResult | BaseException) -> None:
    """Hand a commit's outcome to its waiter (both commit paths; on the waiter's loop)."""
    if future.done():  # the waiter was cancelled (a stopping runner)
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


class GroupCommits:
    """The store's queue of groupable commits (one per store, shared by its database threads)."""

    def __init__(
        self, submit: Callable[[Callable[[], None]], Any], alone: Callable[..., CommitResult]
    ) -> None:
        self._submit = submit  # hands a function to one of the store's database threads
        self._alone = alone  # the store's own commit: one commit, one statement
        self._queue: deque[_Queued] = deque()  # appended on the loop, taken by threads: thread-safe
        self._lock = threading.Lock()
        self._unstarted = 0  # jobs handed to the threads that have not started taking commits
        self.largest_batch = 0  # the most commits one statement carried (tests, benchmarks)
        self.commits = 0  # commits written through the queue
        self.statements = 0  # ... in this many statements

    def accepts(self, commit: Commit) -> bool:
        return groupable(commit)

    def close(self) -> None:
        """Nothing of its own to close: the store closes its threads."""

    async def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        loop = asyncio.get_running_loop()
        queued = _Queued(run_id, owner, commit, now, loop, loop.create_future())
        self._queue.append(queued)
        if self._job_needed():  # at the end of this turn of the loop: commits made ready in it join
            loop.call_soon(self._start_job)
        return await queued.future

    def _job_needed(self) -> bool:
        """True (and counted) when no job is waiting to start: a waiting one takes what is queued."""
        with self._lock:
            if self._unstarted:
                return False
            self._unstarted += 1
            return True

    def _start_job(self) -> None:
        try:
            self._submit(self._write_queued)
        except RuntimeError as exc:  # the store is closed: its threads take nothing more
            with self._lock:
                self._unstarted -= 1
            while batch := self._take():
                for queued in batch:
                    queued.settle(StoreUnavailable(f"the store is closed: {exc}"))

    def _take(self) -> list[_Queued]:
        batch: list[_Queued] = []
        while len(batch) < MAX_BATCH:
            try:
                batch.append(self._queue.popleft())
            except IndexError:
                break
        return batch

    def _write_queued(self) -> None:
        """In a database thread: write what is queued now; never raises (each outcome goes to
        its own waiter)."""
        with self._lock:  # from here on, a commit queued later starts a job of its own
            self._unstarted -= 1
        batch = self._take()
        if not batch:
            return
        if self._queue and self._job_needed():  # more than one statement's worth: the rest next
            self._start_job()
        self.largest_batch = max(self.largest_batch, len(batch))
        self.commits += len(batch)
        self.statements += 1
        outcomes: list[CommitResult | BaseException]
        try:
            outcomes = [self._write_alone(batch[0])] if len(batch) == 1 else self._write_together(batch)
        except BaseException as exc:  # a bug of ours: its waiters hear of it rather than hang
            outcomes = [exc] * len(batch)
        for queued, outcome in zip(batch, outcomes, strict=True):
            queued.settle(outcome)

    def _write_together(self, batch: list[_Queued]) -> list[CommitResult | BaseException]:
        try:
            return list(commit_statement.commit_group([(q.run_id, q.owner, q.commit, q.now) for q in batch]))
        except (OperationalError, InterfaceError) as exc:
            if lost_a_race(exc):  # failed to break a deadlock: rolled back whole; each alone
                return [self._write_alone(queued) for queued in batch]  # (sent again if need be)
            # The connection failed: whether the statement landed may be unknown, so nothing is
            # sent again; each waiter abandons its execution, which reads its history anew, as
            # after any store failure.
            failure = unavailable(exc)
            return [failure for _ in batch]
        except Exception:  # refused by the server (a broken constraint), or a value refused while
            # building it: nothing was written; each alone, so a failure stays its own
            return [self._write_alone(queued) for queued in batch]

    def _write_alone(self, queued: _Queued) -> CommitResult | BaseException:
        try:
            return reconnecting(self._alone)(
                run_id=queued.run_id, owner=queued.owner, commit=queued.commit, now=queued.now
            )
        except Exception as exc:  # LeaseLost, StoreUnavailable, a constraint: the waiter's to raise
            return exc
