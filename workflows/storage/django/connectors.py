"""How a Django store's calls reach the database (`Connector`), and the connectors that need no
event-loop connection: Django's sync thread (`DjangoThread`), a pool of database threads
(`Threads`), and that pool with group commit on PostgreSQL (`PostgresThreads`). The connectors
that send from a runner's event loop are in `loop_connectors`; `paths` chooses one when the store
is built, and every part of the store (runs, claims, resumes, ...) calls it, written once.

As in Procrastinate, the store's SQL is written once over a small interface; what differs by
database and by process (a view's store, a runner's) is the connector, chosen once, never per
call by a setting.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, ClassVar, ParamSpec, TypeVar

from asgiref.sync import sync_to_async
from django.db import connection, connections

from ...core.records import Commit, CommitResult
from ..methods import Statement
from . import notify
from .group_commit import GroupCommits
from .reconnect import reconnecting

P = ParamSpec("P")
R = TypeVar("R")
logger = logging.getLogger(__name__)

Rows = list[list[tuple[Any, ...]]]  # each statement's rows
SyncCommit = Callable[..., CommitResult]  # the store's `commit`, called with keyword arguments


class Connector(ABC):
    """Where a store's calls run, and how its hot calls (a step's commit; a claim with the resume
    reads of the runs it takes, a resumed run's read, a run's start and read) reach the database.
    Built once, with the store, from the number of database threads and the store's own `commit`
    (the thread path of a step's commit)."""

    name: ClassVar[str]  # WORKFLOWS["CONNECTOR"] names it
    vendor: ClassVar[str | None] = None  # the database it serves (None: any)

    def __init__(self, threads: int, commit: SyncCommit) -> None:
        self.threads = threads
        self._commit = commit

    @abstractmethod
    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run a sync function (Django's ORM, a cursor) in the thread this connector says."""

    async def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        """A step's commit: the store's `commit` through `run_sync`, unless the connector has a
        faster path for it."""
        return await self.run_sync(self._commit, run_id=run_id, owner=owner, commit=commit, now=now)

    @property
    def reads_here(self) -> bool:
        """Whether `read` would send statements now (from the event loop): the store builds them
        only then."""
        return False

    async def read(self, statements: list[Statement]) -> Rows | None:
        """Each statement's rows, all in one round trip and one transaction; None: make the call
        through `run_sync` instead (no loop connection, busy, or a statement refused)."""
        return None

    async def watch(self, wake: Callable[[], None]) -> None:
        """PostgreSQL: LISTEN for the NOTIFY every send and start issues on commit. SQLite:
        PRAGMA data_version moves when another connection commits (it reads no table)."""
        await notify.watch(self.run_sync, wake)

    def close(self) -> None:  # noqa: B027 - a connector that opened nothing closes nothing
        """Close what the connector opened (a stopping runner)."""


class DjangoThread(Connector):
    """No database threads of its own (tests, views, a client's store): Django's sync thread
    through `sync_to_async`, sharing the caller's connection and transaction."""

    name = "django-thread"  # what a store without `db_threads` gets: no CONNECTOR names it

    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        return await sync_to_async(reconnecting(fn), thread_sensitive=True)(*args, **kwargs)


class Threads(Connector):
    """A pool of database threads of the store's own (one connection each): runs wait on the
    database in parallel and a call costs a plain executor hop. No event-loop path."""

    name = "threads"

    def __init__(self, threads: int, commit: SyncCommit) -> None:
        super().__init__(threads, commit)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="workflows-db")

    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        call = functools.partial(reconnecting(fn), *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def close(self) -> None:
        """Every thread closes its own connection, then the pool stops."""
        barrier = threading.Barrier(self.threads)

        def close_this_threads_connection() -> None:
            barrier.wait(timeout=10)  # one task per thread: every thread closes its own
            connections.close_all()

        for _ in range(self.threads):
            self._executor.submit(close_this_threads_connection)
        self._executor.shutdown(wait=True)


class PostgresThreads(Threads):
    """PostgreSQL through the database threads, with group commit (`group_commit`): step commits
    queued while every thread is busy share the next statement."""

    name = "postgres-threads"
    vendor = "postgresql"

    def __init__(self, threads: int, commit: SyncCommit) -> None:
        super().__init__(threads, commit)
        self.group = GroupCommits(self._executor.submit, commit)

    async def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        if self.group.accepts(commit):
            return await self.group.commit(run_id=run_id, owner=owner, commit=commit, now=now)
        return await super().commit(run_id=run_id, owner=owner, commit=commit, now=now)

    def close(self) -> None:
        log_group(self.group)
        super().close()
        self.group.close()


def log_group(group: Any) -> None:
    """What group commit did, said when the runner stops."""
    if group.commits:
        logger.info(
            "group commit: %d step commits written in %d statements (at most %d in one)",
            group.commits, group.statements, group.largest_batch,
        )  # fmt: skip


def connection_params() -> tuple[dict[str, Any], str | None]:
    """In a database thread: what Django would connect with, and the role it would assume."""
    return connection.get_connection_params(), connection.settings_dict["OPTIONS"].get("assume_role")


@functools.cache
def pipelines() -> bool:
    """Whether psycopg's libpq can send a pipeline (libpq 14+; psycopg[binary] bundles one, a
    system libpq may be older): without, a resumed run reads its messages when it waits."""
    import psycopg

    return bool(psycopg.Pipeline.is_supported())
