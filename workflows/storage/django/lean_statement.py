"""The step commit's round trip sent on libpq by hand, from the event loop: one statement at a
time on a psycopg AsyncConnection's own libpq connection (`async_commits`).

Why by hand: psycopg's async cursor adds 0.07-0.10 ms to each round trip (its cursor and
prepared-statement bookkeeping, a timer per wait), a sixth of a bare insert's round trip and
about a tenth of a step commit's (`bench/hot_path.py` section 6 measures it against the bare
libpq calls). Only the send and the wait are written here. The rest is psycopg's own: the
connection, the parameters' adaptation (its query class and Transformer), the loading of rows,
and the errors (`psycopg.errors.error_from_result`). So a failure raises what the cursor would
have raised.

The connection stays psycopg's. Other statements may still go on it through psycopg's cursors
while none of these is in flight, and prepared statements have names of their own (`_wfc1`...).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

from .prepared import query_class

PREPARED_MAX = 100  # as psycopg's default `prepared_max`: the least recently used is deallocated


class LeanStatements:
    """One connection's statements: sent, awaited and read by hand; prepared when asked to be
    (and when the connection prepares at all: PREPARED_STATEMENTS)."""

    def __init__(self, conn: Any) -> None:
        from psycopg.adapt import Transformer

        self.conn = conn
        self._tx = Transformer(conn)
        self._prepares = conn.prepare_threshold is not None  # `loop_connection.open_connection`
        self._names: OrderedDict[tuple[bytes, tuple[int, ...]], bytes] = OrderedDict()
        self._made = 0

    async def fetchone(self, text: str, params: Sequence[Any], *, prepare: bool) -> tuple[Any, ...] | None:
        """The statement's first row (None when it returns none). A statement the server refused
        raises psycopg's error for it, and the connection stays usable. A wait cancelled after the
        statement went out closes the connection: whether it ran is unknown, and the connection
        cannot take another statement before its reply."""
        query = query_class()(self._tx)
        query.convert(text, params)
        pg = self.conn.pgconn
        try:
            if prepare and self._prepares:
                name = await self._prepared(query.query, query.types)
                pg.send_query_prepared(name, query.params, param_formats=query.formats)
            else:
                pg.send_query_params(
                    query.query, query.params, param_formats=query.formats, param_types=query.types
                )
            result = await self._result()
        except BaseException:
            if pg.transaction_status == _active():  # sent and unanswered: nothing can follow it
                pg.finish()
            raise
        self._tx.set_pgresult(result)
        return self._tx.load_row(0, tuple) if result is not None and result.ntuples else None

    async def _prepared(self, query: bytes, types: Sequence[int]) -> bytes:
        key = (query, tuple(types))
        name = self._names.get(key)
        if name is not None:
            self._names.move_to_end(key)
            return name
        pg = self.conn.pgconn
        if len(self._names) >= PREPARED_MAX:
            _old, stale = self._names.popitem(last=False)
            if _closes_by_protocol():  # as psycopg: PgBouncer 1.21+ follows a Close, not a DEALLOCATE
                pg.send_close_prepared(stale)
            else:
                pg.send_query(b"DEALLOCATE " + stale)
            await self._result()
        self._made += 1
        name = b"_wfc%d" % self._made
        pg.send_prepare(name, query, param_types=types)
        await self._result()
        self._names[key] = name
        return name

    async def _result(self) -> Any:
        """The reply to what was just sent: its last result, or the server's error raised."""
        from psycopg import errors, pq

        pg = self.conn.pgconn
        while pg.flush():  # a long statement the socket did not take at once
            await _ready(pg.socket, write=True)
        pg.consume_input()
        while pg.is_busy():
            await _ready(pg.socket, write=False)
            pg.consume_input()
        last, failed = None, None
        while (result := pg.get_result()) is not None:
            if result.status in (pq.ExecStatus.FATAL_ERROR, pq.ExecStatus.BAD_RESPONSE):
                failed = failed or errors.error_from_result(result, encoding=self.conn.info.encoding)
            last = result
        if failed is not None:
            raise failed
        return last


async def _ready(fileno: int, *, write: bool) -> None:
    """Wait until the socket can be read (or written): one callback, removed after."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def wake() -> None:  # level-triggered: it may run again before the waiter resumes
        if not ready.done():
            ready.set_result(None)

    try:
        (loop.add_writer if write else loop.add_reader)(fileno, wake)
    except (OSError, ValueError) as exc:  # no socket any more
        from psycopg import OperationalError

        raise OperationalError("connection socket closed") from exc
    try:
        await ready
    finally:
        (loop.remove_writer if write else loop.remove_reader)(fileno)


def _closes_by_protocol() -> bool:
    from psycopg import capabilities

    return capabilities.has_send_close_prepared()


def _active() -> Any:
    from psycopg import pq

    return pq.TransactionStatus.ACTIVE
