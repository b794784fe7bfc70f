"""What a runner does on its own beside its runs: periodic jobs (pruning finished runs) and the
samples of its slots and event-loop lag its observers are told.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable

from ..core.exceptions import StoreUnavailable
from .observers import Observer, RunnerSample

logger = logging.getLogger("workflows.engine.runner")  # the runner's own log, as operators filter it

# Housekeeping the runner does on its own every `seconds` (e.g. pruning finished runs): (seconds, job).
Periodic = tuple[float, Callable[[], Awaitable[object]]]
SAMPLE_EVERY = 5.0  # seconds between the runner's samples of its slots and loop lag (observers)


async def every(
    seconds: float, job: Callable[[], Awaitable[object]], *, owner: str, stopping: Callable[[], bool]
) -> None:
    """Call `job` every `seconds`, the first time at a random point of the first interval, so
    runners started together do not all do it at once. A failure is logged and waits its turn:
    the database out of reach (StoreUnavailable) in one line, as the runner's own calls do."""
    await asyncio.sleep(random.uniform(0, seconds))
    while not stopping():
        try:
            await job()
        except StoreUnavailable as exc:
            logger.warning("runner %s: periodic %r: %s; next in %.0fs", owner, job, exc, seconds)
        except Exception:
            logger.exception("runner %s: periodic %r failed; next in %.0fs", owner, job, seconds)
        await asyncio.sleep(seconds)


async def sample(observers: Observer, take: Callable[[float], RunnerSample]) -> None:
    """Tell observers the runner's slots and how late its event loop wakes (a step body that
    blocks the loop shows up here as lag): `take(lag)` is the sample, every SAMPLE_EVERY seconds."""
    loop = asyncio.get_running_loop()
    while True:
        expected = loop.time() + SAMPLE_EVERY
        await asyncio.sleep(SAMPLE_EVERY)
        observers.runner_sampled(take(max(0.0, loop.time() - expected)))
