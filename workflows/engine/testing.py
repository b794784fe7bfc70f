"""Test your workflows fast: run them in-process until idle, with a clock that skips over sleeps
and retry backoff, so a workflow with a 60 s backoff finishes its test in milliseconds.

    from workflows.testing import run_until_idle

    def test_brief(db):
        handle = registry.client("aiJob").get_or_create(["job-1"])
        handle.send("start", {"title": "t", "transcript": "..."})
        run_until_idle(registry)
        assert handle.info().status == "completed"

`run_until_idle` is synchronous and uses the test's own database connection, so it works inside
Django's TestCase transactions; in an async test use `arun_until_idle` with a transactional db.
"""

from __future__ import annotations

import datetime as dt

from asgiref.sync import async_to_sync

from ..core.clock import FakeClock
from ..storage.base import Store
from . import defaults
from .observers import Observer
from .registry import Registry
from .runner import Runner
from .scheduler import Scheduler

MAX_ROUNDS = 10_000  # guard against a workflow that never settles (e.g. an endless timer loop)


class SkippingClock(FakeClock):
    """Starts at the real time; the test loop moves it to each next wake."""

    def __init__(self) -> None:
        super().__init__(dt.datetime.now(dt.UTC))


async def arun_until_idle(
    registry: Registry | None = None,
    *,
    store: Store | None = None,
    clock: FakeClock | None = None,
    concurrency: int = 10,
    advance: bool = True,
    observers: list[Observer] | None = None,
) -> FakeClock:
    """Run every runnable run; when none is left but some sleep, jump the clock to the earliest
    wake and go on. Returns when only message waits (or nothing) remain. With `advance=False` the
    clock stays put: only what is due now runs (e.g. to act before a timeout). `observers` see the
    executions as a runner's would (to test traces or metrics). Returns the clock."""
    registry = registry or defaults.default_registry()
    store = store or defaults.default_store()
    clock = clock or SkippingClock()
    for _ in range(MAX_ROUNDS):
        runner = Runner(
            registry=registry,
            store=store,
            clock=clock,
            concurrency=concurrency,
            watch=False,
            observers=observers,
        )
        await runner.run_due()
        when = await store.anext_wake_at(owner="", workflows=registry.names())
        if when is None or (not advance and when > clock.now()):
            return clock
        clock.set(when)
    raise RuntimeError(f"runs still active after {MAX_ROUNDS} rounds of run_until_idle")


def run_until_idle(
    registry: Registry | None = None,
    *,
    store: Store | None = None,
    clock: FakeClock | None = None,
    concurrency: int = 10,
    advance: bool = True,
    observers: list[Observer] | None = None,
) -> FakeClock:
    return async_to_sync(arun_until_idle)(
        registry, store=store, clock=clock, concurrency=concurrency, advance=advance, observers=observers
    )


async def afire_schedules(
    registry: Registry | None = None, *, clock: FakeClock, store: Store | None = None
) -> int:
    """Fire the registry's schedules that are due at `clock`'s time, as a runner's schedule
    check would (the first call syncs them in: each then fires next after the clock's time);
    returns how many runs were started. Move the clock to a fire time, call this, then
    `arun_until_idle(..., advance=False)` to run what it started."""
    scheduler = Scheduler(
        registry=registry or defaults.default_registry(), store=store or defaults.default_store(), clock=clock
    )
    return await scheduler.tick()


def fire_schedules(registry: Registry | None = None, *, clock: FakeClock, store: Store | None = None) -> int:
    return async_to_sync(afire_schedules)(registry, clock=clock, store=store)
