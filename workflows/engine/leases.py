"""What a runner knows of its own leases without asking the database: when each was last renewed,
on a clock that counts while the process is stopped (`core.clock.ticks`).

A runner that was frozen (SIGSTOP, a VM paused, a long GC) or cut off from the database past its
lease may find, when it goes on, that another runner took its runs over. Fencing refuses its
late commits, but a step body it starts before its next commit or heartbeat fails would run
beside the new owner's: a side effect twice. So before a step body starts, the runner asks here
whether the lease is surely still its own, and starts nothing when it cannot be sure.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from ..core.clock import ticks

logger = logging.getLogger(__name__)

# Seconds of a lease a runner does not count on: another runner's reading of the database's time
# may be ahead of this one's by up to half of each one's round trip (`AnchoredClock`).
SAFETY_MAX = 1.0
SAFETY_SHARE = 0.1  # ... and at most this share of the lease


class LeaseWatch:
    """Renewal times of the leases a runner holds. A lease renewed at `t` (the moment the claim or
    heartbeat that renewed it was sent: the database set its expiry after that) is surely held
    until `t + lease_seconds - safety`; past that, `held()` is False."""

    def __init__(
        self, lease_seconds: float, *, enabled: bool = True, clock: Callable[[], float] = ticks
    ) -> None:
        self.lease_seconds = lease_seconds
        self.enabled = enabled
        self.safety = min(SAFETY_MAX, SAFETY_SHARE * lease_seconds)
        self._clock = clock
        self._renewed: dict[str, float] = {}

    def now(self) -> float:
        """The reading to pass as `sent` to `renewed`: take it before the renewing call."""
        return self._clock()

    def renewed(self, run_ids: Iterable[str], sent: float) -> None:
        for run_id in run_ids:
            self._renewed[run_id] = max(sent, self._renewed.get(run_id, sent))

    def forget(self, run_id: str) -> None:
        self._renewed.pop(run_id, None)

    def age(self, run_id: str) -> float | None:
        """Seconds since the lease of `run_id` was last renewed (None: not held here)."""
        renewed = self._renewed.get(run_id)
        return None if renewed is None else self._clock() - renewed

    def held(self, run_id: str) -> bool:
        """Whether this runner surely still holds the lease: a run it never renewed counts as not
        held (nothing vouches for it). Always True when the watch is disabled (WORKFLOWS
        ["STALL_CHECK"] False: only to see the multi-host tests fail)."""
        if not self.enabled:
            return True
        age = self.age(run_id)
        if age is not None and age < self.lease_seconds - self.safety:
            return True
        logger.warning(
            "run %s: its lease may have lapsed (last renewed %s ago, lease %.1fs): this runner was"
            " paused or cut off from the database; it starts nothing more for the run",
            run_id,
            "never" if age is None else f"{age:.1f}s",
            self.lease_seconds,
        )
        return False
