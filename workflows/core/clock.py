"""Time as the engine sees it. Every store call takes `now` from a clock, so tests can skip ahead."""

from __future__ import annotations

import datetime as dt


class Clock:
    def now(self) -> dt.datetime:
        return dt.datetime.now(dt.UTC)


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
