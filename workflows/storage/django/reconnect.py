"""A runner keeps one database connection per thread for its life; this is what it does when
that connection fails under a call."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection

from ...core.exceptions import StoreUnavailable


def reconnecting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """After an infrastructure error (connection lost, server restarting, serialization failure,
    deadlock, lock timeout: all OperationalError or InterfaceError in Django) drop the connection
    so the next call reconnects, and say StoreUnavailable: the engine then abandons the execution
    and resumes the run when the store answers again."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            raise unavailable(exc) from exc

    return call


def unavailable(exc: Exception) -> StoreUnavailable:
    """What an infrastructure error becomes: the connection dropped, StoreUnavailable said."""
    drop_connection()
    return StoreUnavailable(f"the database failed: {exc}".strip())


def drop_connection() -> None:
    """Close this thread's connection (outside a transaction block) so the next call reconnects."""
    if connection.in_atomic_block is False:
        with contextlib.suppress(DatabaseError):  # closing a broken connection may fail too
            connection.close()
