"""Time as the engine sees it. Every store call takes `now` from a clock, so tests can skip ahead.

Decisions that two processes must agree on (lease expiry, due times, claims, schedule fires,
limiter windows) are taken on one clock: the database's. A host's wall clock may be minutes off;
`AnchoredClock` reads the database's time now and then and carries it forward on this host's
monotonic clock, so its error is half a round trip to the database, whatever the wall clock says.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections.abc import Awaitable, Callable
from typing import NamedTuple

logger = logging.getLogger(__name__)

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
REFRESH_AFTER = 60.0  # seconds: an anchor this old is read again at the next chance
# Seconds: a wall clock that agrees with the database's this closely (NTP-kept hosts; SQLite or a
# database on the same host always) and has not jumped since the last reading is read as it is.
WALL_TOLERANCE = 0.01
# How fast the boot clock may drift from the database's (100 ppm: far beyond a quartz clock kept by
# NTP): a reading's error grows by this much per second of its age.
MAX_DRIFT = 1e-4
# Linux's boot clock also counts the time a host was suspended (the monotonic clock stands still
# then): after a laptop or VM resumes, the anchored time and a lease's age are still right.
_TICKS = getattr(time, "CLOCK_BOOTTIME", None)


def ticks() -> float:
    """Seconds on a clock that never jumps (NTP, an operator, faketime's wall offset) and counts
    while the process is stopped or the host suspended: what ages and intervals are measured on."""
    return time.clock_gettime(_TICKS) if _TICKS is not None else time.monotonic()


class Clock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)

    async def anow(self) -> dt.datetime:
        """`now()` for async callers: a clock that must read another process's time may do it here."""
        return self.now()


class FakeClock(Clock):
    """A clock that only moves when told to: `workflows.testing` jumps it over sleeps and backoff."""

    def __init__(self, start: dt.datetime | None = None) -> None:
        self._now = start or dt.datetime(2030, 1, 1, tzinfo=dt.UTC)

    def now(self) -> dt.datetime:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += dt.timedelta(seconds=seconds)

    def set(self, when: dt.datetime) -> None:
        if when > self._now:
            self._now = when


class Anchor(NamedTuple):
    """One reading of the database's time: what `AnchoredClock` derives the time from."""

    base: float  # the database's time (seconds since the epoch) minus `ticks()`
    at: float  # `ticks()` when read
    round_trip: float  # seconds the read took: the anchor is right to within half of it
    wall_offset: float  # this host's wall clock minus the database's, in seconds
    wall_at: float  # this host's wall clock when read (`time.time()`)


class AnchoredClock(Clock):
    """The database's time as this process knows it: `refresh()` reads it (with `read`, a store's
    `database_time`) and `now()` carries it forward on `ticks()`. Refreshed by the runner with
    every heartbeat; elsewhere (a web process) when the anchor is older than `refresh_after`
    at the next call that may do I/O: `anow()`, or `now()` outside an event loop. Never read yet
    (or the read failed): this host's wall clock, the one thing left to go by. A wall clock found
    within WALL_TOLERANCE of the database's, and not moved apart from `ticks()` since, is read
    as it is: the same time to that tolerance, and the same as every other reader of this host's."""

    def __init__(
        self,
        read: Callable[[], dt.datetime],
        aread: Callable[[], Awaitable[dt.datetime]],
        *,
        refresh_after: float = REFRESH_AFTER,
    ) -> None:
        self._read, self._aread = read, aread
        self.refresh_after = refresh_after
        self.anchor: Anchor | None = None
        # `ticks()` of the last read, kept or not: a read refused (slower than the reading kept)
        # or failed (the database away) is not tried again at every call, only after
        # `refresh_after` (a web process's every `now()` would otherwise wait on the database).
        self._tried: float | None = None

    def now(self) -> dt.datetime:
        if self._stale() and not _in_event_loop():  # a sync caller may wait for the database
            self.refresh(quiet=True)
        return self._derived()

    async def anow(self) -> dt.datetime:
        if self._stale():
            await self.arefresh(quiet=True)
        return self._derived()

    @property
    def wall_offset(self) -> float | None:
        """Seconds this host's wall clock is ahead of the database's (negative: behind); None
        until the first reading."""
        return self.anchor.wall_offset if self.anchor is not None else None

    def refresh(self, *, quiet: bool = False) -> Anchor | None:
        """Read the database's time now. `quiet`: a failure is logged, not raised (the caller's
        next store call meets the same failure and reports it its own way)."""
        sent, wall_sent = ticks(), time.time()
        self._tried = sent
        try:
            theirs = self._read()
        except Exception:
            _unread(quiet)
            return None
        return self._keep(theirs, sent, wall_sent)

    async def arefresh(self, *, quiet: bool = False) -> Anchor | None:
        sent, wall_sent = ticks(), time.time()
        self._tried = sent
        try:
            theirs = await self._aread()
        except Exception:
            _unread(quiet)
            return None
        return self._keep(theirs, sent, wall_sent)

    def _keep(self, theirs: dt.datetime, sent: float, wall_sent: float) -> Anchor:
        """The new reading, unless the one kept is still the better: its error (half its round trip,
        plus drift since) below the new one's. A read that was in flight while the network was cut
        took seconds, and would make the clock seconds wrong until the next read."""
        received, wall_received = ticks(), time.time()
        kept = self.anchor
        if kept is not None and (received - sent) / 2 > kept.round_trip / 2 + MAX_DRIFT * (
            received - kept.at
        ):
            logger.debug("a reading of the database's time took %.3fs: the last one stands", received - sent)
            return kept
        database = (theirs - EPOCH).total_seconds()
        # The server read its clock somewhere within the round trip: take its middle.
        anchor = Anchor(
            base=database - (sent + received) / 2,
            at=received,
            round_trip=received - sent,
            wall_offset=(wall_sent + wall_received) / 2 - database,
            wall_at=wall_received,
        )
        self.anchor = anchor  # one assignment: a reader in another thread sees one reading whole
        return anchor

    def _stale(self) -> bool:
        tried = self._tried
        return tried is None or ticks() - tried > self.refresh_after

    def _derived(self) -> dt.datetime:
        anchor = self.anchor
        if anchor is None:
            return dt.datetime.now(dt.UTC)
        now_ticks, wall = ticks(), time.time()
        jumped = (wall - anchor.wall_at) - (now_ticks - anchor.at)  # NTP, an operator, a VM resumed
        if abs(anchor.wall_offset) <= WALL_TOLERANCE and abs(jumped) <= WALL_TOLERANCE:
            return dt.datetime.fromtimestamp(wall, dt.UTC)
        return EPOCH + dt.timedelta(seconds=anchor.base + now_ticks)


def _unread(quiet: bool) -> None:
    """A failed read, inside its `except`: raised again unless `quiet`, else logged."""
    if not quiet:
        raise
    logger.debug("the database's time could not be read; the last reading stands", exc_info=True)


def _in_event_loop() -> bool:
    """A sync database call from an event loop's thread is refused (Django) or blocks the loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
