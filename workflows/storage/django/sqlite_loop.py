"""A runner's step commits on SQLite, written from its event loop on a connection of the store's own.

Through the store's database thread a commit costs a hop there and back on top of SQLite's own
work: two thread wake-ups, about 0.1 ms on a small machine, more than the commit's statements
take at `synchronous=NORMAL`. Written in the loop, it costs the statements alone; the loop waits
meanwhile, as long as SQLite takes (with `SQLITE_SYNCHRONOUS=FULL`, the wait for the disk too),
which is the time the committing run waited anyway, but the runner's other runs wait with it.
`bench/side_by_side_sqlite.py` measures a step both ways (the `SqliteLoop` connector, and `"threads"`).

It never waits for a lock, so it never holds the loop for long:
- the connection's busy timeout is 0, and a commit is written there only while the database
  thread has nothing in flight (their writes would otherwise wait for each other); while the
  thread works, the commit waits for it in the loop, as it would have waited behind that work in
  the thread's queue, instead of going there (sent there, commits kept the thread busy under load
  and sent the next ones there too: a busy runner wrote 140 of 11,000 in the loop). A call counts
  in flight until it ends, or until it is cancelled before it started (it never runs);
- `BEGIN IMMEDIATE` finding the write lock taken (another process writes), or any error that
  leaves the transaction open (rolled back: nothing written; a deferred foreign key failing at
  `COMMIT` is one), sends the commit through the thread as before, which waits for the lock (its
  busy timeout) and says any error as it always has; a lost lease is said at once;
- `COMMIT` failing and ending the transaction: whether it landed is unknown, so StoreUnavailable
  (the engine re-reads the run's history) and the connection is dropped, as the thread path does.
Commits with messages or child starts go through the thread: they use the ORM.

Group commit: the commits made ready in one turn of the loop share one transaction, written at
the end of that turn (nothing waits to fill it: a lone commit goes alone, at once), so at
`synchronous=FULL` they wait for the disk once, and a runner takes the write lock once for them
all. Each is written in a savepoint of its own: one that fails (its lease lost, a value refused)
is rolled back alone and said to its waiter, or sent through the thread, as above; the others
commit. A waiter cancelled before the turn ends is not written.

Checkpoints: this connection never copies the WAL into the database itself (`wal_autocheckpoint`
off, so the loop never waits for it); every CHECKPOINT_EVERY commits it asks the database thread
for one and does not wait. Commits meanwhile wait for it, as a commit that checkpoints in the
thread waits for its checkpoint: a checkpoint that no write of this process runs beside copies
the whole WAL, so the next write starts the WAL file over instead of growing it.

Change check: a connection's `PRAGMA data_version` moves when another connection commits. The
runner now writes on two connections, each seeing the other's commits as changes, so the runner's
watcher asks this one (in the loop, no hop): it moves for other processes' commits and for the
database thread's few writes (claims, heartbeats), never for step commits.

Written by hand: Python's sqlite3 driver has no async interface, and `aiosqlite` runs each call in
a thread of its own, which is the hop this module removes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import sqlite3
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from django.db import connection

from ...core.exceptions import LeaseLost, StoreUnavailable
from ...core.records import Commit, CommitResult
from . import commit_statement, writes

logger = logging.getLogger(__name__)

# Commits between the passive checkpoints asked of the database thread. A step's commit appends
# about 9 WAL pages: about SQLite's own default of 1,000 pages between checkpoints.
CHECKPOINT_EVERY = 100
# Seconds a commit waiting for the database thread looks again, if nothing told it to.
IDLE_POLL = 0.002


@dataclass(frozen=True)
class LoopParams:
    """How the database thread's connection is set, for this one to match."""

    path: str
    synchronous: int
    foreign_keys: int


def loop_params() -> LoopParams | None:
    """In the database thread: its database file and settings, or None when another connection
    cannot share its writes this way (an in-memory database; a file not in WAL mode)."""
    if connection.vendor != "sqlite" or connection.is_in_memory_db():  # type: ignore[attr-defined]
        return None
    with connection.cursor() as cursor:
        values = []
        for pragma in ("journal_mode", "synchronous", "foreign_keys"):
            cursor.execute(f"PRAGMA {pragma}")
            values.append(cursor.fetchone()[0])
    journal, synchronous, foreign_keys = values
    if str(journal).lower() != "wal":
        return None
    return LoopParams(str(connection.settings_dict["NAME"]), int(synchronous), int(foreign_keys))


def passive_checkpoint() -> None:
    """In the database thread: copy what the WAL holds into the database, blocking no writer."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA wal_checkpoint(PASSIVE)")
    except Exception:  # the next one tries again; SQLite's own, on other connections, too
        logger.warning("SQLite: a passive checkpoint failed", exc_info=True)


class SqliteLoopCommits:
    """The store's loop commits on SQLite (one per store, used from the runner's event loop)."""

    def __init__(
        self,
        *,
        params: Callable[[], Awaitable[LoopParams | None]],
        thread_idle: Callable[[], bool],
        alone: Callable[[commit_statement.Pending], Awaitable[CommitResult]],
        checkpoint: Callable[[], None],
    ) -> None:
        self._params = params  # `loop_params`, read in the database thread
        self._thread_idle = thread_idle
        self._alone = alone  # the same commit through the database thread
        self._checkpoint = checkpoint  # asks the thread for `passive_checkpoint`, without waiting
        self._read: LoopParams | None = None
        self._shareable = True  # False once `loop_params` says this file cannot be shared
        self._conn: sqlite3.Connection | None = None  # not tied to a loop: a test's next one uses it
        self._since_checkpoint = 0
        self._waiters: list[asyncio.Future[None]] = []  # commits waiting for the thread to be idle
        self._batch: list[_Queued] = []  # commits made ready in this turn of the loop
        self._flush: asyncio.Handle | None = None  # the batch's write, when scheduled
        self.commits = 0  # commits written in the loop (tests, benchmarks)
        self.transactions = 0  # ... in this many transactions
        self.through_thread = 0  # ... and sent through the thread instead

    def accepts(self, commit: Commit) -> bool:
        # A transaction step's body runs its ORM code on Django's connection: through the thread.
        return not commit.messages and not commit.children and commit.in_transaction is None

    async def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        while self._shareable:
            if not self._thread_idle():  # as a commit sent there would: wait for what it does
                await self._until_thread_idle()
                continue
            conn = await self.connection()
            if conn is None:
                break
            if not self._thread_idle():  # opening it asked the thread
                continue
            result = await self._joined((run_id, owner, commit, now))
            if result is not None:
                return result
            break
        self.through_thread += 1
        return await self._alone((run_id, owner, commit, now))

    async def _until_thread_idle(self) -> None:
        """Until a call to the database thread returns with nothing else in flight there
        (`thread_returned`), or IDLE_POLL has passed (a call whose waiter was cancelled, or a
        checkpoint, returns unseen)."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self._waiters.append(waiter)
        timer = loop.call_later(IDLE_POLL, _wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            if waiter in self._waiters:
                self._waiters.remove(waiter)

    def thread_returned(self) -> None:
        """In the loop, after a call to the database thread returned: the commits waiting for it
        go on once nothing is in flight there."""
        if self._waiters and self._thread_idle():
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                _wake(waiter)
        if self._batch and self._flush is not None and self._thread_idle():  # at once, not at the next poll
            self._flush.cancel()
            self._flush = asyncio.get_running_loop().call_soon(self._write_batch)

    def _joined(self, pending: commit_statement.Pending) -> asyncio.Future[CommitResult | None]:
        """The commit, written with the others made ready in this turn of the loop (`_write_batch`):
        its result, or None when the thread should write it."""
        loop = asyncio.get_running_loop()
        queued = _Queued(pending, loop.create_future())
        self._batch.append(queued)
        if self._flush is None:
            self._flush = loop.call_soon(self._write_batch)
        return queued.done

    def _write_batch(self) -> None:
        """At the end of the loop's turn: the batch in one transaction, once the database thread
        has nothing in flight (else a little later). Never raises: every waiter is answered."""
        self._flush = None
        if not self._thread_idle():
            self._flush = asyncio.get_running_loop().call_later(IDLE_POLL, self._write_batch)
            return
        batch, self._batch = [q for q in self._batch if not q.done.done()], []
        conn = self._reopened() if batch else None
        try:
            if conn is not None:
                self._write(conn, batch)
        except BaseException as exc:
            for queued in batch:
                _answer(queued, exc)
        for queued in batch:  # not written here: the thread writes it
            _answer(queued, None)

    async def connection(self) -> sqlite3.Connection | None:
        """The connection, opened on first use (None: the file cannot be shared so)."""
        if self._read is None and self._shareable:
            self._read = await self._params()
            self._shareable = self._read is not None
        return self._reopened()

    def _reopened(self) -> sqlite3.Connection | None:
        """The connection, opened again if it was dropped (None: the file cannot be shared so, or
        opening failed: the thread's path says what fails, as it opens its own)."""
        if self._conn is None and self._read is not None:
            try:
                self._conn = _open(self._read)
            except sqlite3.Error:
                logger.debug("SQLite loop connection: open failed", exc_info=True)
        return self._conn

    def version(self) -> int | None:
        """`PRAGMA data_version` of this connection (None: it fails). Only after `connection()`
        found the file shareable."""
        conn = self._reopened()
        if conn is None:
            return None
        try:
            return int(conn.execute("PRAGMA data_version").fetchone()[0])
        except sqlite3.Error:
            self._drop()
            return None

    def close(self) -> None:
        """After the runner's loop ended: nothing waits for a batch any more."""
        if self._flush is not None:
            self._flush.cancel()
            self._flush = None
        self._batch = []
        self._drop()

    def _write(self, conn: sqlite3.Connection, batch: list[_Queued]) -> None:
        """The batch's commits in one transaction on `conn`, each in a savepoint of its own; the
        waiters of those written get their results once it committed. Those left unanswered
        go through the thread: the write lock was taken (another process writes), or an error
        before the transaction ended wrote nothing of them."""
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error:  # another process holds the write lock (busy timeout 0)
            if conn.in_transaction:  # never left open: it would hold the lock
                self._rollback(conn)
            return
        written: list[tuple[_Queued, CommitResult]] = []
        for queued in batch:
            run_id, owner, commit, now = queued.pending
            try:
                conn.execute("SAVEPOINT step_commit")
                result = writes.write_commit(_Cursor(conn), run_id, owner, commit, now, on_pg=False)
                conn.execute("RELEASE step_commit")
            except BaseException as exc:
                if not conn.in_transaction:  # the whole transaction ended: landed or not, unknown
                    self._drop()
                    raise self._lost(run_id, exc) from exc
                conn.execute("ROLLBACK TO step_commit")  # this one alone: nothing of it written
                conn.execute("RELEASE step_commit")
                if isinstance(exc, LeaseLost) or not isinstance(exc, Exception):
                    _answer(queued, exc)
                else:  # said by the thread path if it happens again there, as without this path
                    logger.debug(
                        "SQLite loop commit of run %s sent through the thread", run_id, exc_info=True
                    )
                continue
            written.append((queued, result))
        try:
            conn.execute("COMMIT")
        except BaseException as exc:
            if not conn.in_transaction:  # ended without our COMMIT succeeding: landed or not, unknown
                self._drop()
                for queued, _ in written:
                    _answer(queued, self._lost(queued.pending[0], exc))
                return
            self._rollback(conn)  # nothing written: the thread writes them
            return
        for queued, result in written:
            _answer(queued, result)
        self.commits += len(written)
        self.transactions += 1
        self._since_checkpoint += len(written)
        if self._since_checkpoint >= CHECKPOINT_EVERY:
            self._since_checkpoint = 0
            self._checkpoint()

    @staticmethod
    def _lost(run_id: str, exc: BaseException) -> BaseException:
        if isinstance(exc, sqlite3.Error):
            return StoreUnavailable(f"SQLite failed to commit a write of run {run_id}: {exc}")
        return exc

    def _rollback(self, conn: sqlite3.Connection) -> None:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:  # closing it rolls back too
            self._drop()

    def _drop(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except sqlite3.Error:
                logger.debug("SQLite loop connection: close failed", exc_info=True)


@dataclass
class _Queued:
    pending: commit_statement.Pending
    done: asyncio.Future[CommitResult | None]  # None: not written here, the thread writes it


def _answer(queued: _Queued, outcome: Any) -> None:
    """Its waiter's answer, unless it has one: a result, None, or an exception to raise."""
    if queued.done.done():
        return
    if isinstance(outcome, BaseException):
        queued.done.set_exception(outcome)
    else:
        queued.done.set_result(outcome)


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _open(params: LoopParams) -> sqlite3.Connection:
    """Set as the thread's connection (Django's `uri=True`; its synchronous and foreign_keys),
    with a busy timeout of 0 and no automatic checkpoints (see the module's docstring)."""
    conn = sqlite3.connect(params.path, timeout=0, isolation_level=None, check_same_thread=False, uri=True)
    conn.execute(f"PRAGMA synchronous={params.synchronous:d}")
    conn.execute(f"PRAGMA foreign_keys={params.foreign_keys:d}")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    return conn


_PLACEHOLDER = re.compile(r"(?<!%)%s")  # as Django's SQLite backend converts them


@lru_cache(maxsize=256)
def _qmark(query: str) -> str:
    """A statement with Django's `%s` placeholders in SQLite's style (the store's texts are few)."""
    return _PLACEHOLDER.sub("?", query).replace("%%", "%")


class _Cursor:
    """What `writes.write_commit` asks of a cursor, on a sqlite3 connection."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._cursor = conn.cursor()

    def execute(self, query: str, params: Any = ()) -> None:
        self._cursor.execute(_qmark(query), params)

    def fetchone(self) -> Any:
        return self._cursor.fetchone()

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount
