"""Which connector a Django store's calls go through (`StorePaths`, under every part of
`DjangoStore`), chosen once when the store is built (`connectors`, `loop_connectors`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from ...core.records import CommitResult, EntryRecord, MessageRecord
from ..base import Store
from .connectors import Connector, DjangoThread, PostgresThreads, SyncCommit, Threads, pipelines
from .loop_connectors import PostgresLoop, SqliteLoop

P = ParamSpec("P")
R = TypeVar("R")

__all__ = ["CONNECTORS", "ConnectorChoice", "StorePaths", "choose", "pipelines"]

# What WORKFLOWS["CONNECTOR"] may name ("auto", the default, chooses by the database).
CONNECTORS: dict[str, type[Connector]] = {
    "postgres-loop": PostgresLoop,
    "postgres-threads": PostgresThreads,
    "sqlite-loop": SqliteLoop,
    "threads": Threads,
}
# A connector's name, or what builds one from the number of threads and the store's `commit`
# (a class, or e.g. `functools.partial(PostgresLoop, group=False)` in a test or a benchmark).
ConnectorChoice = str | Callable[[int, SyncCommit], Connector]


class StorePaths(Store):
    """Where a Django store's calls run: its connector (`connector`), chosen once here. Without
    `db_threads`, Django's sync thread (`DjangoThread`); with, the one `connector` names, or
    WORKFLOWS["CONNECTOR"], or by default the one for the database: PostgreSQL `PostgresLoop`,
    SQLite `SqliteLoop` (one thread whatever is asked)."""

    def __init__(self, db_threads: int | None = None, connector: ConnectorChoice | None = None) -> None:
        self.connector = choose(db_threads, connector, self._commit_here)
        # What a claim from the event loop read for the runs it took that ran before, kept for
        # their `aload_resume`, which follows at once (`DjangoClaims._keep_prefetched`).
        self._prefetched: dict[str, tuple[list[EntryRecord], list[MessageRecord] | None]] = {}

    def _commit_here(self, **kwargs: Any) -> CommitResult:
        """The store's `commit`, looked up at each call (a test may replace it on the store)."""
        return self.commit(**kwargs)

    async def run_sync(self, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """In the thread the connector says: Django's, or this store's own."""
        return await self.connector.run_sync(fn, *args, **kwargs)

    def close(self) -> None:
        """Close the connector's connections and threads (a stopping runner)."""
        self.connector.close()

    async def watch(self, wake: Callable[[], None]) -> None:
        """Until cancelled, `wake()` when another process may have made work runnable."""
        await self.connector.watch(wake)


def choose(db_threads: int | None, choice: ConnectorChoice | None, commit: SyncCommit) -> Connector:
    """The store's connector. WORKFLOWS["CONNECTOR"] is read here, once, and only for a store with
    database threads (a runner's): a store without has Django's thread, whatever it says."""
    if db_threads is None:  # Django's thread, or a connector built on it (`DjangoThreadLoop`)
        if choice is None:
            return DjangoThread(0, commit)
        built_on = choice.func if isinstance(choice, functools.partial) else choice
        if not (isinstance(built_on, type) and issubclass(built_on, DjangoThread)):
            raise ValueError("a connector other than DjangoThread (or one built on it) needs db_threads")
        return choice(0, commit)  # type: ignore[operator]
    threads = 1 if connection.vendor == "sqlite" else max(1, db_threads)  # SQLite: one writer
    factory: Callable[[int, SyncCommit], Connector]
    if choice is None:  # what the setting names (whatever it holds: a wrong one is refused)
        factory = named(getattr(settings, "WORKFLOWS", {}).get("CONNECTOR", "auto"), connection.vendor)
    else:
        factory = named(choice, connection.vendor) if isinstance(choice, str) else choice
    return factory(threads, commit)


def named(name: object, vendor: str) -> type[Connector]:
    """The connector `name` says for this database (ImproperlyConfigured, as check
    workflows.E023 says it, for a name that is none, or one for another database)."""
    if name == "auto":
        defaults: dict[str, type[Connector]] = {"postgresql": PostgresLoop, "sqlite": SqliteLoop}
        return defaults.get(vendor, Threads)
    problem = connector_problem(name, vendor)
    if problem or not isinstance(name, str):
        raise ImproperlyConfigured(problem)
    return CONNECTORS[name]


def connector_problem(name: object, vendor: str) -> str | None:
    """What is wrong with WORKFLOWS["CONNECTOR"] = name on this database, if anything."""
    if name == "auto":
        return None
    known = ", ".join(f'"{n}"' for n in ["auto", *CONNECTORS])
    if not isinstance(name, str) or name not in CONNECTORS:
        return f'WORKFLOWS["CONNECTOR"] must be one of {known}, not {name!r}.'
    serves = CONNECTORS[name].vendor
    if serves is not None and serves != vendor:
        return f'WORKFLOWS["CONNECTOR"] is "{name}", a connector for {serves}, but the database is {vendor}.'
    return None
