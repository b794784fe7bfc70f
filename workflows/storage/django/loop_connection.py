"""A connection of the store's own that lives in a runner's event loop: psycopg's AsyncConnection,
in autocommit, on Django's connection parameters. The calls a runner makes most go on such
connections (step commits in `async_commits`; claims and resume reads in `loop_reads`): each
then costs its round trip alone, with no hop to a database thread and back and no Django cursor
layers on top (`bench/hot_path.py` measures both ways)."""

from __future__ import annotations

import asyncio
import select
from collections.abc import Awaitable, Callable
from typing import Any

from .prepared import NEVER_BY_COUNT, async_cursor_class


class LoopConnection:
    """Opened on first use, again after `forget` (it failed) and in a new event loop (a
    connection belongs to the loop that opened it: a test's `asyncio.run` each time)."""

    def __init__(self, connect: Callable[[], Awaitable[Any]], *, check_idle: bool = False) -> None:
        self._connect = connect  # opens one (`PostgresLoop._loop_connection`)
        self._conn: Any = None  # psycopg.AsyncConnection
        self._loop: asyncio.AbstractEventLoop | None = None
        self._check_idle = check_idle  # a web request's: see `dropped`

    @property
    def current(self) -> Any:
        """The open connection, if any (tests, benchmarks)."""
        return self._conn

    async def get(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._conn is not None and (
            self._conn.closed or self._loop is not loop or (self._check_idle and dropped(self._conn))
        ):
            self.forget()
        if self._conn is None:
            self._conn = await self._connect()
            self._loop = loop
        return self._conn

    def forget(self) -> None:
        """Close it without a round trip or its loop (a broken one may not answer; a stopping
        runner closes its store after its loop ended); the next `get` opens another."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            conn.pgconn.finish()


def dropped(conn: Any) -> bool:
    """Whether the server closed this idle connection (a restart, an idle timeout): its socket
    reads (the server's FATAL notice, or the end) while no statement is in flight. One poll, no
    round trip: a web request then opens a new connection instead of failing with 503, as a
    pool's check before lending spares it. A runner's connections skip it: a cut says
    StoreUnavailable and the engine re-reads, whatever the moment of the cut."""
    try:
        readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    except Exception:  # psycopg: no socket any more; the OS: a closed descriptor
        return True
    return bool(readable)


async def open_connection(params: dict[str, Any], prepare: bool, role: str | None) -> Any:
    """An autocommit async connection on Django's connection parameters (`params`, from
    `DatabaseWrapper.get_connection_params()`: host, options, SSL, Django's adapters and loaders),
    with parse-once cursors; `prepare`: statements prepared on the server (PREPARED_STATEMENTS)."""
    import psycopg
    from psycopg import sql as psql

    params = {k: v for k, v in params.items() if k not in {"cursor_factory", "prepare_threshold"}}
    conn = await psycopg.AsyncConnection.connect(
        **params,
        autocommit=True,
        cursor_factory=async_cursor_class(),
        prepare_threshold=NEVER_BY_COUNT if prepare else None,  # prepared when asked, or never
    )
    if role:  # OPTIONS["assume_role"], as Django's own connections do
        await conn.execute(psql.SQL("SET ROLE {}").format(psql.Literal(role)))
    return conn
