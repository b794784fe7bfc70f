"""The runner's presence among the others: its record in the store (what it serves, its lease
period, its host's clock offset), kept fresh on each heartbeat and withdrawn at stop; the look
around on each read of the schedule (take over the runs of this host's dead runners, say once
when due runs have no live runner that knows their workflow); and the anchoring of the runner's
clock to the database's time. Presence serves operators and takeovers, never the runner's own
work: a failure here is logged and tried again later.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Collection
from dataclasses import replace

from ..core.clock import AnchoredClock, Clock
from ..core.records import RunnerRecord, RunRecord
from ..storage.base import Store
from . import presence
from .registry import Registry

logger = logging.getLogger("workflows.engine.runner")  # the runner's own log, as operators filter it

FORGET_RUNNERS_AFTER = dt.timedelta(days=1)  # presence records of runners dead this long go
CLOCK_WARN_OFFSET = 1.0  # seconds: a host wall clock this far off the database's is logged


class Roster:
    """This runner's presence record and what it learns from the others' (see the module doc)."""

    def __init__(
        self,
        *,
        store: Store,
        clock: Clock,
        owner: str,
        registry: Registry,
        lease_seconds: float,
        concurrency: int,
        schedule_check: float,
    ) -> None:
        self.store = store
        self.clock = clock
        self.owner = owner
        self.registry = registry
        self.lease_seconds = lease_seconds
        self.concurrency = concurrency
        self.schedule_check = schedule_check
        self.presence: RunnerRecord | None = None  # as registered in the store
        self.runners: list[RunnerRecord] = []  # every runner's presence, as last read
        self.dead: set[str] = set()  # runners of this host found dead: their runs were taken over
        self.announce_at = 0.0  # loop time of the next try to record this runner's presence
        self._unserved: set[str] = set()  # workflows already reported as served by no live runner
        self._clock_off = False  # this host's wall clock was last seen off the database's

    def due_to_announce(self) -> bool:
        return self.presence is None and asyncio.get_running_loop().time() >= self.announce_at

    async def announce(self) -> None:
        """Record this runner's presence, forget runners dead for long, and look around at once:
        a restarted runner takes its dead predecessor's runs before its first claim. Presence
        serves operators and takeovers, never the runner's own work: when it cannot be recorded
        the runner goes on and tries again at its next read of the schedule."""
        now = self.clock.now()
        me = presence.describe_self(
            owner=self.owner,
            workflows=self.registry.versions(),
            lease_seconds=self.lease_seconds,
            concurrency=self.concurrency,
            now=now,
            clock_offset=self.clock_offset,
        )
        try:
            await self.store.aregister_runner(me)
            self.presence = me
            await self.store.aforget_runners(seen_before=now - FORGET_RUNNERS_AFTER)
        except Exception as exc:
            self.announce_at = asyncio.get_running_loop().time() + self.schedule_check
            logger.warning("runner %s: presence not recorded (trying again later): %s", self.owner, exc)
            return
        await self.look_around()

    async def look_around(self) -> None:
        """On each read of the schedule: take over the runs of this host's dead runners, and say
        once per workflow when runs are due that no live runner knows (they would wait silently).
        A failure is logged and left for the next read: the runner's own work goes on."""
        if self.presence is None:
            return
        try:
            await self._take_over_and_report(self.presence)
        except Exception as exc:
            logger.warning(
                "runner %s: could not look for dead runners and unserved runs: %s", self.owner, exc
            )

    async def _take_over_and_report(self, me: RunnerRecord) -> None:
        now = self.clock.now()
        runners = self.runners = await self.store.alist_runners()
        for dead in presence.dead_predecessors(me, runners):
            expired = await self.store.aexpire_leases(dead.owner, lapsed_at=dead.last_seen, now=now)
            self.dead.add(dead.owner)
            await self.store.aunregister_runner(dead.owner)
            logger.warning(
                "runner %s: runner %s (pid %d on this host) is gone; taking over its %d run(s) now",
                self.owner,
                dead.owner,
                dead.pid,
                expired,
            )
        due = await self.store.adue_elsewhere(self.registry.names(), now=now)
        served = presence.serving(runners, now)
        unserved = {name: n for name, n in due.items() if name not in served}
        for name in sorted(set(unserved) - self._unserved):
            logger.warning(
                "%d run(s) of workflow %r are due and no live runner knows that workflow"
                " (this runner serves %s): they wait until a runner that registers it starts",
                unserved[name],
                name,
                ", ".join(self.registry.names()) or "nothing",
            )
        self._unserved = set(unserved)

    async def refresh(self) -> None:
        if self.presence is None:
            return
        now, offset = self.clock.now(), self.clock_offset
        try:
            if not await self.store.atouch_runner(self.owner, now=now, clock_offset=offset):
                # forgotten (taken for dead): announce again
                await self.store.aregister_runner(replace(self.presence, last_seen=now, clock_offset=offset))
        except Exception as exc:
            logger.warning("runner %s: presence not refreshed: %s", self.owner, exc)

    async def withdraw(self) -> None:
        if self.presence is None:
            return
        try:
            await self.store.aunregister_runner(self.owner)
        except Exception as exc:
            logger.warning("runner %s: presence not removed (it shows as dead later): %s", self.owner, exc)
        self.presence = None

    @property
    def clock_offset(self) -> float | None:
        """Seconds this host's wall clock is ahead of the database's, as last measured."""
        return self.clock.wall_offset if isinstance(self.clock, AnchoredClock) else None

    async def read_clock(self) -> None:
        """Anchor the runner's clock to the database's time again (each heartbeat), and say when
        this host's wall clock is off: nothing the runner decides rests on it, but logs, traces and
        the host's other programs do."""
        if not isinstance(self.clock, AnchoredClock):
            return
        anchor = await self.clock.arefresh(quiet=True)
        if anchor is None:
            return
        off = abs(anchor.wall_offset) > CLOCK_WARN_OFFSET
        if off and not self._clock_off:
            logger.warning(
                "runner %s: this host's wall clock is %+.1fs off the database's; the runner takes its"
                " decisions on the database's clock, but fix the host's time (NTP)",
                self.owner,
                anchor.wall_offset,
            )
        self._clock_off = off


def cut_off_by(run: RunRecord, dead: Collection[str] = ()) -> str:
    """Why the attempts of a run's last execution were cut off, for the lost attempts' record;
    `dead`: the runners whose process this runner saw gone (a same-host takeover)."""
    if not run.previous_owner:
        return "the database failed under the runner"
    if run.previous_owner in dead:
        seen = f" (last seen at {run.lease_lapsed_at:%H:%M:%S} UTC)" if run.lease_lapsed_at else ""
        return f"runner {run.previous_owner} died{seen}: its process on this host is gone, so its runs were taken over at once"
    lapsed = f" (its lease lapsed at {run.lease_lapsed_at:%H:%M:%S} UTC)" if run.lease_lapsed_at else ""
    return f"runner {run.previous_owner} stopped responding{lapsed}"
