"""The connectors that send from an event loop: a runner's store on PostgreSQL (`PostgresLoop`:
step commits on one connection of the store's own, claims and resume reads on another) and on
SQLite (`SqliteLoop`: step commits and the change check on a connection of its own while the one
database thread is idle), where everything else goes through the database threads
(`connectors.Threads`); and a web process's store on PostgreSQL (`DjangoThreadLoop`: async starts
and reads on a few connections of its own, the rest in Django's thread)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import datetime as dt
import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

from ...core.records import Commit, CommitResult
from . import commit_statement, loop_connection, notify, prepared
from .async_commits import AsyncCommits
from .connectors import (
    DjangoThread,
    P,
    R,
    Rows,
    Statement,
    SyncCommit,
    Threads,
    connection_params,
    log_group,
    pipelines,
)
from .loop_reads import LoopReads
from .reconnect import reconnecting
from .sqlite_loop import SqliteLoopCommits, loop_params, passive_checkpoint

logger = logging.getLogger(__name__)


class PostgresLoop(Threads):
    """A runner's store on PostgreSQL: step commits from the event loop (`async_commits`, grouped
    unless `group=False`), claims, resume reads, run starts and run reads on another loop
    connection (`loop_reads`), the rest through the database threads."""

    name = "postgres-loop"
    vendor = "postgresql"

    def __init__(self, threads: int, commit: SyncCommit, *, group: bool = True, reads: bool = True) -> None:
        super().__init__(threads, commit)
        self.group = AsyncCommits(connect=self._loop_connection, alone=self._commit_in_thread, group=group)
        # A libpq older than 14 cannot pipeline: a claim's resume reads need it, so the reads
        # then go through the threads (decided here, once).
        self.reads = LoopReads(self._loop_connection) if reads and pipelines() else None

    async def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        if self.group.accepts(commit):  # a commit of several statements goes through the threads
            return await self.group.commit(run_id=run_id, owner=owner, commit=commit, now=now)
        return await super().commit(run_id=run_id, owner=owner, commit=commit, now=now)

    @property
    def reads_here(self) -> bool:
        """One call at a time on the loop's connection: while one is in flight, the threads."""
        return self.reads is not None and not self.reads.busy

    async def read(self, statements: list[Statement]) -> Rows | None:
        return None if self.reads is None else await self.reads.fetch(statements)

    def close(self) -> None:
        log_group(self.group)
        super().close()
        self.group.close()
        if self.reads is not None:
            self.reads.close()

    async def _loop_connection(self) -> Any:
        return await _open_loop_connection(self)

    async def _commit_in_thread(self, pending: commit_statement.Pending) -> CommitResult:
        run_id, owner, commit, now = pending
        return await self.run_sync(self._commit, run_id=run_id, owner=owner, commit=commit, now=now)


class DjangoThreadLoop(DjangoThread):
    """The default store of a process that is not a runner (a web server's) on PostgreSQL: its
    async starts and reads (`aget_or_create`, `aget`, as an async view makes them) go out from the
    event loop on up to `size` autocommit connections of its own (`loop_reads`), one round trip
    each and no hop to a thread; everything else, and those calls when every connection is busy,
    in Django's thread as `DjangoThread` makes them. A connection the server dropped while idle (a
    restart) is replaced before use, not failed with. Those connections see only what is
    committed: a call inside the caller's `transaction.atomic` must be a sync one (`get_or_create`)."""

    name = "django-thread-loop"
    vendor = "postgresql"

    def __init__(self, threads: int, commit: SyncCommit, *, size: int = 4) -> None:
        super().__init__(threads, commit)
        self.reads = LoopReads(self._loop_connection, size=size, check_idle=True)

    @property
    def reads_here(self) -> bool:
        return not self.reads.busy

    async def read(self, statements: list[Statement]) -> Rows | None:
        return await self.reads.fetch(statements)

    def close(self) -> None:
        self.reads.close()

    async def _loop_connection(self) -> Any:
        return await _open_loop_connection(self)


class SqliteLoop(Threads):
    """A runner's store on SQLite: one database thread; step commits written from the event loop
    on a connection of its own while the thread is idle (`sqlite_loop`), and the change check
    asked of that connection."""

    name = "sqlite-loop"
    vendor = "sqlite"

    def __init__(self, threads: int, commit: SyncCommit) -> None:
        super().__init__(threads, commit)
        self._submitted = self._finished = 0  # calls sent to the thread, and ended there
        self._ended_lock = threading.Lock()  # `_finished` moves in the thread and in the loop
        self.loop_commits = SqliteLoopCommits(
            params=lambda: self.run_sync(loop_params),
            thread_idle=lambda: self._submitted == self._finished,
            alone=self._commit_in_thread,
            checkpoint=self._checkpoint_in_thread,
        )

    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Counted in flight: a loop commit waits until the thread has nothing to do."""
        call = functools.partial(reconnecting(fn), *args, **kwargs)
        try:
            return await asyncio.wrap_future(self._submit_counted(call))
        finally:
            self.loop_commits.thread_returned()

    async def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        if self.loop_commits.accepts(commit):  # messages or child starts: through the thread
            return await self.loop_commits.commit(run_id=run_id, owner=owner, commit=commit, now=now)
        return await super().commit(run_id=run_id, owner=owner, commit=commit, now=now)

    async def watch(self, wake: Callable[[], None]) -> None:
        """The loop's connection is asked (the thread's would see the loop's commits as another's);
        a file that cannot be shared so is watched through the thread."""
        if await self.loop_commits.connection() is not None:
            await notify.poll_data_version_in_loop(self.loop_commits.version, wake)
        else:
            await super().watch(wake)

    def close(self) -> None:
        if self.loop_commits.commits or self.loop_commits.through_thread:
            logger.info(
                "SQLite: %d step commits written from the event loop, %d through the database thread",
                self.loop_commits.commits, self.loop_commits.through_thread,
            )  # fmt: skip
        super().close()
        self.loop_commits.close()

    def _submit_counted(self, call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """A call counted in flight until it ends, or is cancelled before it started (a cancelled
        waiter's queued call never runs)."""
        self._submitted += 1  # in the loop only
        try:
            future = self._executor.submit(call)
        except BaseException:
            self._submitted -= 1
            raise
        future.add_done_callback(self._call_ended)  # in the thread, or where it was cancelled
        return future

    def _call_ended(self, _future: concurrent.futures.Future[Any]) -> None:
        with self._ended_lock:
            self._finished += 1

    def _checkpoint_in_thread(self) -> None:
        """Counted in flight, not awaited: the loop's commits wait for it, so it copies the whole
        WAL and the next write starts the WAL file over."""
        with contextlib.suppress(RuntimeError):  # the store is closing
            done = asyncio.wrap_future(self._submit_counted(passive_checkpoint))
            done.add_done_callback(lambda _done: self.loop_commits.thread_returned())

    async def _commit_in_thread(self, pending: commit_statement.Pending) -> CommitResult:
        run_id, owner, commit, now = pending
        return await self.run_sync(self._commit, run_id=run_id, owner=owner, commit=commit, now=now)


async def _open_loop_connection(connector: Threads | DjangoThread) -> Any:
    """A loop connection on what Django would connect with (read in the connector's thread)."""
    params, role = await connector.run_sync(connection_params)
    return await loop_connection.open_connection(params, prepared.enabled(), role)
