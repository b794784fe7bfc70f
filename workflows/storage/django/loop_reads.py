"""A runner's claims, resumed runs' reads, run starts and run reads sent from its event loop, on
a connection of their own (`loop_connection`; step commits have another, so a claim never waits
behind a commit). A claim's pipeline also reads the history and messages of the runs it took that
ran before (`statements.postgres.CLAIMED_HISTORY`), so a run woken by a message pays one such call before its
first step; through a database thread each call costs a hop to the thread and back on top of its
round trip (`bench/send_path.py` shows the phases).

One call at a time per connection (a runner has one; a web process's store a few, see
`loop_connectors.DjangoThreadLoop`): while every one is in flight the next goes through the
threads, so a runner waking for one run pays no hop, and a busy one still reads as many histories
at once as it has threads. The claim of workflows with a concurrency limit stays on the threads (it takes
their advisory lock in a transaction of several statements).

Failures are said as the threads say them. The connection failing (psycopg's OperationalError,
InterfaceError): StoreUnavailable, and the connection is dropped (a claim that may have landed
leaves its runs to lapse, as through the threads). A statement refused (anything else psycopg
raises): nothing was written (the statements share one transaction), so the caller makes the
same call through the threads, which raise Django's error. Written by hand: several statements
in one round trip on the loop's connection is what no library does for Django's queries.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from ...core.exceptions import StoreUnavailable
from ..methods import Statement
from .loop_connection import LoopConnection


class LoopReads:
    """`size` connections, each opened on first use; the last one freed is the next one used, so a
    lone caller keeps reusing one warm connection and the others open only under concurrency."""

    def __init__(
        self, connect: Callable[[], Awaitable[Any]], size: int = 1, *, check_idle: bool = False
    ) -> None:
        self.connections = [LoopConnection(connect, check_idle=check_idle) for _ in range(max(1, size))]
        self._free = list(reversed(self.connections))  # popped from the end: connections[0] first
        self.calls = 0  # answered here (tests, benchmarks)
        self.statements = 0  # ... in this many statements
        self.refused = 0  # refused here, so made through the threads

    @property
    def connection(self) -> LoopConnection:
        """The connection a lone call uses (tests, benchmarks)."""
        return self.connections[0]

    @property
    def busy(self) -> bool:
        """A call is in flight on every connection: the next goes through the threads."""
        return not self._free

    async def fetch(self, statements: list[Statement]) -> list[list[tuple[Any, ...]]] | None:
        """Each statement's rows; all sent in one pipeline: one round trip, one transaction.
        None when a statement was refused (nothing of them was written)."""
        import psycopg

        connection = self._free.pop()  # IndexError if busy: callers ask `busy` first
        try:
            conn = await connection.get()
            async with contextlib.AsyncExitStack() as stack:
                cursors = [await stack.enter_async_context(conn.cursor()) for _ in statements]
                async with conn.pipeline():
                    for cursor, (text, params) in zip(cursors, statements, strict=True):
                        await cursor.execute(text, params, prepare=True)  # unless it prepares nothing
                # A statement answering no rows (an INSERT without RETURNING) reads as none.
                rows = [await cursor.fetchall() if _has_rows(cursor) else [] for cursor in cursors]
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            connection.forget()
            raise StoreUnavailable(f"the database failed: {exc}".strip()) from exc
        except (psycopg.Error, ValueError, TypeError):
            self.refused += 1
            return None
        except BaseException:  # cancelled mid-call: the connection may be left mid-pipeline
            connection.forget()
            raise
        finally:
            self._free.append(connection)
        self.calls += 1
        self.statements += len(statements)
        return rows

    def close(self) -> None:
        for connection in self.connections:
            connection.forget()


def _has_rows(cursor: Any) -> bool:
    """Whether the statement answered rows (as `cursor.description` says, without building its
    columns: a claimed run's row has thirty, each read per call)."""
    from psycopg.pq import ExecStatus

    result = cursor.pgresult
    return result is not None and (result.nfields > 0 or result.status == ExecStatus.TUPLES_OK)
