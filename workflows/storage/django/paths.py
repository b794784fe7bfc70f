"""Where a Django store's calls run: Django's thread, the store's own database threads, or a
runner's event loop (`StorePaths`, under every part of `DjangoStore`)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import (
    connection,
    connections,
)

from ...core.records import (
    CommitResult,
    EntryRecord,
    MessageRecord,
)
from ..base import Store
from . import commit_statement, loop_connection, notify, prepared
from .async_commits import AsyncCommits
from .group_commit import GroupCommits
from .loop_reads import LoopReads
from .reconnect import reconnecting
from .sqlite_loop import SqliteLoopCommits, loop_params, passive_checkpoint

P = ParamSpec("P")
R = TypeVar("R")
logger = logging.getLogger(__name__)


class StorePaths(Store):
    """Where a Django store's calls run, chosen when it is built: Django's sync thread (no
    `db_threads`), or a pool of database threads of its own; and, for a runner's store, the
    event-loop paths of its step commits and reads (`async_commits`, `group_commit`,
    `sqlite_loop`, `loop_reads`)."""

    def __init__(self, db_threads: int | None = None) -> None:
        self._executor: ThreadPoolExecutor | None = None
        self._threads = 0
        if db_threads is not None:
            self._threads = 1 if connection.vendor == "sqlite" else max(1, db_threads)
            self._executor = ThreadPoolExecutor(max_workers=self._threads, thread_name_prefix="workflows-db")
        # A runner's store on PostgreSQL: its step commits go from the event loop on an async
        # connection of its own (`async_commits`), or, with ASYNC_COMMITS off, through the
        # threads with group commit (`group_commit`); everything else goes through the threads.
        self._group: AsyncCommits | GroupCommits | None = None
        if self._executor is not None and connection.vendor == "postgresql":
            if _setting("ASYNC_COMMITS"):
                self._group = AsyncCommits(
                    connect=self._loop_connection,
                    alone=self._commit_in_thread,
                    group=_setting("GROUP_COMMIT"),
                )
            elif _setting("GROUP_COMMIT"):
                self._group = GroupCommits(self._executor.submit, self.commit)
        # A runner's store on SQLite: its step commits are written from the event loop on a
        # connection of its own while the one database thread is idle (`sqlite_loop`).
        self._sqlite_loop: SqliteLoopCommits | None = None
        self._submitted = self._finished = 0  # calls sent to the thread, and ended there
        self._ended_lock = threading.Lock()  # `_finished` moves in the thread and in the loop
        if self._executor is not None and connection.vendor == "sqlite" and _setting("ASYNC_COMMITS"):
            self._sqlite_loop = SqliteLoopCommits(
                params=lambda: self.run_sync(loop_params),
                thread_idle=lambda: self._submitted == self._finished,
                alone=self._commit_in_thread,
                checkpoint=self._checkpoint_in_thread,
            )
        # ... and its claims and resume reads on another (`loop_reads`), when libpq pipelines.
        self._reads: LoopReads | None = None
        self._prefetched: dict[str, tuple[list[EntryRecord], list[MessageRecord] | None]] = {}
        if self._executor is not None and connection.vendor == "postgresql":
            if _setting("ASYNC_CLAIMS") and pipelines():
                self._reads = LoopReads(self._loop_connection)

    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """In Django's database thread, or this store's own threads (`threads`)."""
        if self._executor is None:
            return await sync_to_async(reconnecting(fn), thread_sensitive=True)(*args, **kwargs)
        call = functools.partial(reconnecting(fn), *args, **kwargs)
        if self._sqlite_loop is None:
            return await asyncio.get_running_loop().run_in_executor(self._executor, call)
        try:
            return await asyncio.wrap_future(self._submit_counted(call))
        finally:
            self._sqlite_loop.thread_returned()

    def _submit_counted(self, call: Callable[[], Any]) -> concurrent.futures.Future[Any]:
        """SQLite's one database thread: a call counted in flight until it ends, or is cancelled
        before it started (a cancelled waiter's queued call never runs)."""
        assert self._executor is not None
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
        if self._executor is not None and self._sqlite_loop is not None:
            with contextlib.suppress(RuntimeError):  # the store is closing
                done = asyncio.wrap_future(self._submit_counted(passive_checkpoint))
                done.add_done_callback(self._checkpoint_returned)

    def _checkpoint_returned(self, _done: asyncio.Future[None]) -> None:
        if self._sqlite_loop is not None:
            self._sqlite_loop.thread_returned()

    def close(self) -> None:
        """Close the pool's connections and threads (a stopping runner)."""
        if self._group is not None and self._group.commits:
            logger.info(
                "group commit: %d step commits written in %d statements (at most %d in one)",
                self._group.commits, self._group.statements, self._group.largest_batch,
            )  # fmt: skip
        if self._sqlite_loop is not None and (self._sqlite_loop.commits or self._sqlite_loop.through_thread):
            logger.info(
                "SQLite: %d step commits written from the event loop, %d through the database thread",
                self._sqlite_loop.commits, self._sqlite_loop.through_thread,
            )  # fmt: skip
        if self._executor is not None:
            barrier = threading.Barrier(self._threads)

            def close_this_threads_connection() -> None:
                barrier.wait(timeout=10)  # one task per thread: every thread closes its own
                connections.close_all()

            for _ in range(self._threads):
                self._executor.submit(close_this_threads_connection)
            self._executor.shutdown(wait=True)
        if self._group is not None:
            self._group.close()
        if self._reads is not None:
            self._reads.close()
        if self._sqlite_loop is not None:
            self._sqlite_loop.close()

    async def _loop_connection(self) -> Any:
        params, role = await self.run_sync(_connection_params)
        return await loop_connection.open_connection(params, prepared.enabled(), role)

    async def _commit_in_thread(self, pending: commit_statement.Pending) -> CommitResult:
        run_id, owner, commit, now = pending
        return await self.run_sync(self.commit, run_id=run_id, owner=owner, commit=commit, now=now)

    async def watch(self, wake: Callable[[], None]) -> None:
        """PostgreSQL: LISTEN for the NOTIFY that every send and start issues on commit.
        SQLite: PRAGMA data_version moves when another connection commits (it reads no table);
        a runner writing its step commits from the loop asks the loop's connection (`sqlite_loop`)."""
        if self._sqlite_loop is not None and await self._sqlite_loop.connection() is not None:
            await notify.poll_data_version_in_loop(self._sqlite_loop.version, wake)
        else:
            await notify.watch(self.run_sync, wake)


def _setting(name: str) -> bool:
    """`WORKFLOWS["GROUP_COMMIT"]` or `["ASYNC_COMMITS"]`, default True (read here:
    `workflows.conf` imports the store)."""
    return bool(getattr(settings, "WORKFLOWS", {}).get(name, True))


def _connection_params() -> tuple[dict[str, Any], str | None]:
    """In a database thread: what Django would connect with, and the role it would assume."""
    return connection.get_connection_params(), connection.settings_dict["OPTIONS"].get("assume_role")


@functools.cache
def pipelines() -> bool:
    """Whether psycopg's libpq can send a pipeline (libpq 14+; psycopg[binary] bundles one, a
    system libpq may be older): without, a resumed run reads its messages when it waits."""
    import psycopg

    return bool(psycopg.Pipeline.is_supported())
