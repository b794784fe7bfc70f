"""One clock for shared decisions: a store's `shared_clock` is anchored to the store's time
(`database_time`), whatever this host's wall clock says; runners and clients take their times
from it and say how far the host's wall clock is off."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time

import pytest

from tests.support import now
from workflows import setup, workflow
from workflows.core.clock import AnchoredClock, Clock
from workflows.engine.client import WorkflowClient
from workflows.engine.runner import Runner
from workflows.storage.django import DjangoStore

from .test_presence import runners, until

SKEW = dt.timedelta(seconds=120)
CLOSE = dt.timedelta(seconds=2)  # what a loaded machine may take between two readings here


class SkewedStore(DjangoStore):
    """A store whose clock (the database's) is 120 s ahead of this host's: as seen from a host
    whose wall clock is 120 s behind. Its shared clock is its own (a Django store's is the
    process's), so that it reads this store's time."""

    reads = 0

    def database_time(self) -> dt.datetime:
        self.reads += 1
        return dt.datetime.now(dt.UTC) + SKEW

    @functools.cached_property
    def shared_clock(self) -> AnchoredClock:
        return AnchoredClock(self.database_time, self.adatabase_time)


@pytest.fixture
def skewed(engine_db) -> SkewedStore:
    return SkewedStore()


async def body(ctx):
    return await ctx.step("one", lambda s: 1)


registry = setup(use={"wf": workflow(body)})


def test_an_anchored_clock_tells_the_databases_time_and_the_hosts_offset():
    store = SkewedStore()
    clock = store.shared_clock
    assert isinstance(clock, AnchoredClock) and clock.anchor is None
    assert abs(clock.now() - (now() + SKEW)) < CLOSE  # read at the first call (no event loop here)
    assert store.reads == 1
    assert abs(clock.wall_offset + SKEW.total_seconds()) < CLOSE.total_seconds()
    assert 0 <= clock.anchor.round_trip < CLOSE.total_seconds()
    clock.now()
    assert store.reads == 1  # carried forward on the monotonic clock until the anchor is old
    clock.refresh_after = 0.0
    clock.now()
    assert store.reads == 2


def test_a_failing_read_keeps_the_last_reading_and_never_read_falls_back_to_the_wall_clock():
    calls = []

    def read():
        calls.append(1)
        raise ConnectionError("the database is away")

    async def aread():
        return read()

    clock = AnchoredClock(read, aread)
    assert abs(clock.now() - now()) < CLOSE and clock.anchor is None  # quiet: the wall clock
    with pytest.raises(ConnectionError):
        clock.refresh()
    good = AnchoredClock(lambda: dt.datetime.now(dt.UTC) + SKEW, aread, refresh_after=0.0)
    good.refresh()
    good._read = read  # the database goes away: the last reading stands
    assert abs(good.now() - (now() + SKEW)) < CLOSE
    assert len(calls) == 3


async def test_in_an_event_loop_now_never_reads_but_anow_does():
    store = SkewedStore()
    clock = store.shared_clock
    assert abs(clock.now() - now()) < CLOSE and store.reads == 0  # a loop never waits on a read
    assert abs(await clock.anow() - (now() + SKEW)) < CLOSE and store.reads == 1
    assert abs(clock.now() - (now() + SKEW)) < CLOSE  # the reading serves `now()` from then on


async def test_a_client_starts_runs_on_the_databases_clock(skewed):
    store = skewed
    handle = await WorkflowClient(registry, "wf", store=store).aget_or_create(["k"])
    run = store.get_run(handle.run_id)
    assert abs(run.created_at - (now() + SKEW)) < CLOSE
    assert abs(run.wake_at - (now() + SKEW)) < CLOSE  # due when the runners' clock says so


async def test_a_runner_decides_on_the_databases_clock_and_says_its_hosts_offset(skewed, caplog):
    store = skewed
    handle = await WorkflowClient(registry, "wf", store=store).aget_or_create(["k"])
    runner = Runner(registry=registry, store=store, heartbeat_seconds=0.05, watch=False)
    assert runner.clock is store.shared_clock
    with caplog.at_level(logging.WARNING, logger="workflows.engine.runner"):
        task = asyncio.create_task(runner.run())
        await until(lambda: store.get_run(handle.run_id).status == "completed", "the run to complete")
        await until(lambda: runner.owner in runners(store), "the runner's presence")
        [me] = store.list_runners()
        runner.request_stop()
        await asyncio.wait_for(task, 10)
    assert abs(me.started_at - (now() + SKEW)) < CLOSE  # presence on the database's clock
    assert abs(me.clock_offset + SKEW.total_seconds()) < CLOSE.total_seconds()
    assert "wall clock is -120" in caplog.text and "off the database's" in caplog.text


async def test_a_runner_given_a_clock_keeps_it(skewed):
    store = skewed
    clock = Clock()
    runner = Runner(registry=registry, store=store, clock=clock, watch=False)
    await asyncio.wait_for(runner.run(until_idle=True), 10)
    assert runner.clock is clock and runner.clock_offset is None and store.reads == 0


def test_a_wall_clock_that_agrees_with_the_databases_is_read_as_it_is_until_it_jumps(monkeypatch):
    clock = AnchoredClock(lambda: dt.datetime.now(dt.UTC), None)
    clock.refresh()
    assert abs(clock.wall_offset) < 0.01
    before = now()
    assert before <= clock.now() <= now()  # the wall clock itself, not a derivation of it
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 60)  # NTP steps the wall clock 60 s ahead
    assert abs(clock.now() - before) < CLOSE  # derived from the reading: the jump is ignored


def test_a_slow_reading_never_replaces_a_better_one(monkeypatch):
    """A read in flight while the network was cut took seconds: its time is only known to within
    half of that, and the reading kept (drift since included) is better."""
    readings = iter([dt.datetime.now(dt.UTC) + SKEW])
    ticks_now = [100.0]
    monkeypatch.setattr("workflows.core.clock.ticks", lambda: ticks_now[0])

    def read():
        return next(readings)

    clock = AnchoredClock(read, None)
    clock.refresh()
    good = clock.anchor
    assert good.round_trip == 0.0

    def slow_read():
        ticks_now[0] += 6.6  # the query waited out a partition
        return dt.datetime.now(dt.UTC) + SKEW - dt.timedelta(seconds=3.3)

    clock._read = slow_read
    assert clock.refresh() is good and clock.anchor is good  # kept: 3.3 s of error against ~0
    ticks_now[0] += 600  # ten minutes on: the kept reading may have drifted by up to 60 ms
    clock._read = lambda: dt.datetime.now(dt.UTC) + SKEW
    fresh = clock.refresh()
    assert fresh is not good and clock.anchor is fresh  # a quick reading always wins then


def test_a_refused_or_failed_read_is_not_tried_again_at_every_call(monkeypatch):
    """A web process's `now()` must not wait on the database at every call while reads are refused
    (slower than the reading kept) or fail (the database away): it tries again after
    `refresh_after`."""
    ticks_now = [100.0]
    monkeypatch.setattr("workflows.core.clock.ticks", lambda: ticks_now[0])
    reads = []

    def read():
        reads.append(ticks_now[0])
        if len(reads) > 1:
            raise ConnectionError("the database is away")
        return dt.datetime.now(dt.UTC) + SKEW

    clock = AnchoredClock(read, None, refresh_after=60.0)
    clock.now()
    first = clock.anchor
    assert len(reads) == 1 and first is not None
    ticks_now[0] += 61  # the reading is old: the next call reads, and the read fails
    clock.now()
    for _ in range(100):
        clock.now()
    assert len(reads) == 2  # not once per call
    ticks_now[0] += 61
    clock.now()
    assert len(reads) == 3
    assert clock.anchor is first  # the first reading stands
