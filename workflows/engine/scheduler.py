"""The runner's side of schedules: sync the code's declarations into the store when it starts,
then on each schedule check start the runs of every fire that is due, and say when the next one
is so the runner wakes in time. Every runner does this; the store's fenced `fire_schedule` makes
each fire start its runs once (and each run's key, derived from the fire time, makes them unique).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable

from ..core.clock import Clock
from ..core.exceptions import StoreUnavailable
from ..storage.base import Store
from .registry import Registry

logger = logging.getLogger(__name__)

RETRY_BASE = 0.5  # seconds: first pause after the store failed, doubling ...
RETRY_MAX = 30.0  # seconds: ... up to this


class Scheduler:
    def __init__(self, *, registry: Registry, store: Store, clock: Clock) -> None:
        self.registry = registry
        self.store = store
        self.clock = clock
        self.next_fire: dt.datetime | None = None  # the earliest next fire of the schedules we serve
        self._synced = False

    async def sync(self) -> None:
        """Upsert the declared schedules (a schedule of a served workflow that the code no longer
        declares is marked gone). Raises when the store is away; `tick` tries again."""
        now = self.clock.now()
        declared = [s.declaration(now) for s in self.registry.schedules.values()]
        await self.store.async_schedules(declared=declared, served=self.registry.names(), now=now)
        self._synced = True

    async def tick(self) -> int:
        """Start the runs of every due fire; returns how many this runner started (or found: a
        fire's run that already existed counts too). Sets `next_fire`, the earliest next fire."""
        if not self._synced:
            await self.sync()
        if not self.registry.schedules:
            self.next_fire = None
            return 0
        now = self.clock.now()
        upcoming: list[dt.datetime] = []
        started = 0
        for row in await self.store.alist_schedules():
            spec = self.registry.schedules.get(row.name)
            if spec is None or row.paused or row.gone or row.next_fire_at is None:
                continue
            if row.next_fire_at > now:
                upcoming.append(row.next_fire_at)
                continue
            try:
                definition = self.registry.get(spec.workflow)
                starts = [spec.run_start(definition, fire) for fire in spec.due(row.next_fire_at, now)]
            except Exception:  # a key function or state() that fails: this fire waits, others go on
                logger.exception(
                    "schedule %r: could not build its runs; trying again at the next check", row.name
                )
                continue
            following = spec.next_after(now)
            runs = await self.store.afire_schedule(
                row.name, expected_next=row.next_fire_at, starts=starts, next_fire_at=following, now=now
            )
            if runs is not None:
                started += len(runs)
                fired = ", ".join(s.fire_time.isoformat() for s in starts) or "no fire time (skipped)"
                logger.info("schedule %r fired %s: %d run(s)", row.name, fired, len(runs))
            upcoming.append(following)
        self.next_fire = min(upcoming) if upcoming else None
        return started

    async def run(self, *, every: float, wake: Callable[[], None]) -> None:
        """The runner's helper task: tick at every fire time we know of and at least every
        `every` seconds (a schedule resumed or re-timed elsewhere is seen then); `wake()` the
        runner when runs were started. A store failure is logged and tried again with backoff."""
        failures = 0
        while True:
            try:
                if await self.tick():
                    wake()
                failures = 0
            except Exception as exc:
                failures += 1
                delay = min(RETRY_MAX, RETRY_BASE * 2 ** (failures - 1))
                if isinstance(exc, StoreUnavailable):  # the database away: expected, one line
                    logger.warning("schedules: %s; trying again in %.1fs", exc, delay)
                else:
                    logger.exception("schedules: the store failed; trying again in %.1fs", delay)
                await asyncio.sleep(delay)
                continue
            if not self.registry.schedules:
                return  # synced (schedules gone from code marked so): nothing to fire
            pause = every
            if self.next_fire is not None:
                pause = min(every, max(0.0, (self.next_fire - self.clock.now()).total_seconds()))
            await asyncio.sleep(pause)
