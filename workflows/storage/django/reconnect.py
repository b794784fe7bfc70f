"""A runner keeps one database connection per thread for its life; this is what it does when
that connection fails under a call, and when PostgreSQL fails a transaction to break a deadlock."""

from __future__ import annotations

import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from django.db import DatabaseError, InterfaceError, OperationalError, connection

from ...core.exceptions import StoreUnavailable

logger = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def reconnecting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """After an infrastructure error (connection lost, server restarting, serialization failure,
    deadlock, lock timeout: all OperationalError or InterfaceError in Django; a commit sends a
    deadlock's victim again first, see `retrying_lost_races`) drop the connection so the next call
    reconnects, and say StoreUnavailable: the engine then abandons the execution and resumes the
    run when the store answers again."""

    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (OperationalError, InterfaceError) as exc:
            raise unavailable(exc) from exc

    return call


# deadlock_detected, serialization_failure: PostgreSQL rolled the transaction back whole to break
# a conflict with another; sent again, it usually goes through.
RACE_LOST = frozenset({"40P01", "40001"})
RACE_RETRIES = 3
RACE_BACKOFF = 0.01  # seconds: the first pause before a lost race's retry, doubling, jittered


def race_backoff(attempt: int) -> float:
    """The pause before retry `attempt` (from 0) of a transaction PostgreSQL failed to break a
    conflict. Sent again at once, it can take the rows back before the peer it lost to, woken by
    the rollback, gets them, and lose to it again at every retry (seen in CI); a pause lets that
    peer finish first."""
    return RACE_BACKOFF * 2**attempt * random.uniform(0.5, 1.0)


def lost_a_race(exc: BaseException) -> bool:
    """Whether `exc` (psycopg's, or Django's wrapping one) is PostgreSQL failing a transaction to
    break a deadlock or a serialization conflict: nothing of it was written."""
    return any(getattr(e, "sqlstate", None) in RACE_LOST for e in (exc, exc.__cause__))


def retrying_lost_races(fn: F) -> F:
    """`fn` (one transaction) called again when PostgreSQL failed it to break a deadlock or a
    serialization conflict, a few times; not inside a caller's transaction, which is aborted."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(RACE_RETRIES + 1):
            try:
                return fn(*args, **kwargs)
            except OperationalError as exc:
                if attempt == RACE_RETRIES or connection.in_atomic_block or not lost_a_race(exc):
                    raise
                logger.info("%s lost a race in the database; called again: %s", fn.__name__, exc)
                time.sleep(race_backoff(attempt))
        raise AssertionError("unreachable")

    return call  # type: ignore[return-value]


def unavailable(exc: Exception) -> StoreUnavailable:
    """What an infrastructure error becomes: the connection dropped, StoreUnavailable said."""
    drop_connection()
    return StoreUnavailable(f"the database failed: {exc}".strip())


def drop_connection() -> None:
    """Close this thread's connection (outside a transaction block) so the next call reconnects."""
    if connection.in_atomic_block is False:
        with contextlib.suppress(DatabaseError):  # closing a broken connection may fail too
            connection.close()
