"""Where the operators' list reads go, and how old what they read is.

WORKFLOWS["READ_DATABASE"] names a Django database alias (a streaming replica) for the reads an
operator's page or an API list makes: they may be a little behind and nothing acts on them. Every
read a run's correctness depends on (starts, sends, claims, commits, actions, a run read before
acting on it, a run's page) stays on the primary: those never call this module.

`source()` says where to read and how far behind that is (on PostgreSQL, from the standby's own
replay position: one small query); `read(fn)` runs `fn(alias)` there and, when the replica cannot
be reached or a read on it fails, runs it again on the primary and says so. A failed replica is
then left alone for RETRY_SECONDS, so a replica that is down does not add a connect timeout to
every page.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.http import HttpResponse
from django.utils.connection import ConnectionDoesNotExist

from .. import conf
from ..core.durations import format_duration

logger = logging.getLogger(
    "workflows.read_source"
)  # its name before workflows.reads: logging configs know it

T = TypeVar("T")

RETRY_SECONDS = 10.0  # after a failure, lists read the primary this long before trying the replica again

_down: dict[str, tuple[float, str]] = {}  # alias -> (monotonic time to try again, why it failed)

# One round trip on the standby. Behind: it has received WAL it has not replayed yet; its lag is
# then the age of the last transaction it replayed. Caught up with all it received and still
# streaming: nothing is waiting, whatever that age (an idle primary commits nothing). Not
# receiving at all (its primary gone, no WAL receiver): that age is all one can say.
_LAG_SQL = """
SELECT pg_is_in_recovery(),
       CASE WHEN pg_is_in_recovery() THEN pg_is_wal_replay_paused() ELSE false END,
       COALESCE(pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) > 0, false),
       EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())::float8,
       (SELECT count(*) FROM pg_stat_wal_receiver),
       (SELECT status FROM pg_stat_wal_receiver LIMIT 1)
"""


@dataclass(frozen=True)
class ReadSource:
    """Where a page's list reads went and how old they are, for the page's note and the API's
    X-Data-Source / X-Data-Age headers."""

    alias: str  # the database alias read
    replica: bool = False  # alias is WORKFLOWS["READ_DATABASE"] (else the primary)
    lag_seconds: float | None = 0.0  # how far behind the primary; None: unknown
    paused: bool = False  # the standby's replay is paused
    streaming: bool = True  # the standby receives from its primary
    vendor: str = "postgresql"
    unavailable: str | None = None  # READ_DATABASE is set but could not be read: why

    @property
    def behind(self) -> bool:
        """The data may miss recent changes (a figure above zero, unknown, or replay paused)."""
        return self.replica and (self.lag_seconds is None or self.lag_seconds > 0 or self.paused)

    @property
    def note(self) -> str | None:
        """The sentence a page shows; None when it read the primary with no replica configured."""
        if self.unavailable is not None:
            return f"Replica unavailable ({self.unavailable}): read from the primary."
        if not self.replica:
            return None
        if self.vendor != "postgresql":
            return f"Read from a replica (its lag is not measured on {self.vendor})."
        if not self.streaming:
            if self.lag_seconds is None:
                return "Read from a replica that is not receiving from the primary, lag unknown."
            age = format_duration(self.lag_seconds)
            return f"Read from a replica that is not receiving from the primary; its last replayed change is {age} old."
        paused = " whose replay is paused" if self.paused else ""
        if self.lag_seconds is None:
            return f"Read from a replica{paused}, lag unknown."
        if self.lag_seconds <= 0:
            return f"Read from a replica{paused}, up to date."
        return f"Read from a replica{paused}, {format_duration(self.lag_seconds)} behind."

    def headers(self) -> dict[str, str]:
        """X-Data-Source (primary or replica, with flags) and X-Data-Age in seconds (left out when
        unknown), for an API list response: the JSON body keeps its shape."""
        flags = []
        if self.unavailable is not None:
            flags.append("replica-unavailable")
        if self.paused:
            flags.append("replay-paused")
        if not self.streaming:
            flags.append("not-streaming")
        found = {"X-Data-Source": "; ".join(["replica" if self.replica else "primary", *flags])}
        if self.lag_seconds is not None and (self.vendor == "postgresql" or not self.replica):
            found["X-Data-Age"] = f"{max(self.lag_seconds, 0.0):.3f}".rstrip("0").rstrip(".")
        return found


PRIMARY = ReadSource(DEFAULT_DB_ALIAS)


def read_alias() -> str | None:
    """WORKFLOWS["READ_DATABASE"], or None when lists read the primary."""
    alias = conf.get("READ_DATABASE")
    return None if not alias or alias == DEFAULT_DB_ALIAS else str(alias)


def source(*, measure: bool = True) -> ReadSource:
    """Where list reads go now. With `measure`, the replica's lag is read (this also proves it
    answers); without, the first read there does (a live stream, polled often, skips the figure)."""
    alias = read_alias()
    if alias is None:
        return PRIMARY
    down = _down.get(alias)
    if down is not None and down[0] > time.monotonic():
        return ReadSource(DEFAULT_DB_ALIAS, unavailable=down[1])
    try:
        connection = connections[alias]
    except ConnectionDoesNotExist:
        return _failed(alias, "no such database alias", None)
    if not measure:
        return ReadSource(alias, replica=True, lag_seconds=None, vendor=connection.vendor)
    try:
        return _measure(alias)
    except DatabaseError as exc:
        return _failed(alias, "cannot read it", exc)


def read(
    fn: Callable[[str], T], found: ReadSource | None = None, *, measure: bool = True
) -> tuple[T, ReadSource]:
    """`fn(alias)` where `source()` says (or `found`); when it fails on the replica, again on the
    primary: a replica's trouble shows as a note, never as an error page. `fn` must finish its
    reads (return lists, not querysets)."""
    found = found or source(measure=measure)
    if not found.replica:
        return fn(found.alias), found
    try:
        return fn(found.alias), found
    except DatabaseError as exc:
        fallback = _failed(found.alias, "a read failed", exc)
        return fn(DEFAULT_DB_ALIAS), fallback


def read_into(response: HttpResponse, fn: Callable[[str], T]) -> T:
    """`read(fn)` for an API list: where it read and how old that is go in `response`'s headers
    (X-Data-Source, X-Data-Age), so the JSON body keeps its shape."""
    result, found = read(fn)
    for name, value in found.headers().items():
        response[name] = value
    return result


def failed(found: ReadSource, exc: BaseException) -> ReadSource:
    """For a caller that reads outside `read` (the admin's lists): the replica failed, read the
    primary for a while."""
    return _failed(found.alias, "a read failed", exc)


def forget_failures() -> None:
    """Try the replica again at the next read (tests; an operator's fixed replica needs no call)."""
    _down.clear()


def _failed(alias: str, why: str, exc: BaseException | None) -> ReadSource:
    logger.warning(
        "read database %r unavailable (%s): reading the primary for %s s",
        alias,
        why,
        RETRY_SECONDS,
        exc_info=exc,
    )
    _down[alias] = (time.monotonic() + RETRY_SECONDS, why)
    try:
        connections[alias].close()  # a broken connection must not be reused
    except Exception:  # closing a dead connection may fail in any way
        pass
    return ReadSource(DEFAULT_DB_ALIAS, unavailable=why)


def _measure(alias: str) -> ReadSource:
    connection = connections[alias]
    connection.ensure_connection()
    if connection.vendor != "postgresql":
        return ReadSource(alias, replica=True, lag_seconds=None, vendor=connection.vendor)
    with connection.cursor() as cursor:
        cursor.execute(_LAG_SQL)
        recovering, paused, pending, age, receivers, status = cursor.fetchone()
    if not recovering:  # not a standby (a test's mirror, a promoted replica): nothing to catch up
        return ReadSource(alias, replica=True)
    age = None if age is None else max(float(age), 0.0)
    if pending:
        return ReadSource(alias, replica=True, lag_seconds=age, paused=bool(paused))
    if receivers == 0 or (status is not None and status != "streaming"):
        return ReadSource(alias, replica=True, lag_seconds=age, paused=bool(paused), streaming=False)
    return ReadSource(alias, replica=True, lag_seconds=0.0, paused=bool(paused))
