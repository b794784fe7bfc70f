"""What a runner does on its own beside its runs: periodic jobs (pruning finished runs), the
samples of its slots and event-loop lag its observers are told, and its pause after a failure.
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


async def pause_after_failure(exc: Exception, owner: str, seconds: float, wake: asyncio.Event) -> bool:
    """The claim loop failed with `exc`: say so (the database out of reach in one line; anything
    else with its traceback), then wait `seconds` or until `wake` is set, whichever comes first.
    The LISTEN connection's reconnect sets it, so after a restart or a partition the runner is
    back within a second or so of the database, not at the end of a pause grown long. `wake` is
    not cleared here (the claim loop clears it before each claim): set while the failing call
    was in flight, as the reconnect may well be, it ends the pause at once. Returns whether it
    was woken: the claim loop then starts its pauses short again (the database answering, its
    pool may still be reconnecting for a moment)."""
    if isinstance(exc, StoreUnavailable):
        logger.warning("runner %s: %s; retrying in %.1fs", owner, exc, seconds)
    else:
        logger.error("runner %s: the store failed; retrying in %.1fs", owner, seconds, exc_info=exc)
    try:
        await asyncio.wait_for(wake.wait(), seconds)
    except TimeoutError:
        return False
    return True


async def sample(observers: Observer, take: Callable[[float], RunnerSample]) -> None:
    """Tell observers the runner's slots and how late its event loop wakes (a step body that
    blocks the loop shows up here as lag): `take(lag)` is the sample, every SAMPLE_EVERY seconds."""
    loop = asyncio.get_running_loop()
    while True:
        expected = loop.time() + SAMPLE_EVERY
        await asyncio.sleep(SAMPLE_EVERY)
        observers.runner_sampled(take(max(0.0, loop.time() - expected)))
