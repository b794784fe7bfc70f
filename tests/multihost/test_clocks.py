"""Hosts whose wall clocks disagree by minutes (libfaketime: +120 s, 0, -120 s; the monotonic
clock untouched): runs drain correctly across them, a cron schedule fires once per fire time and
on time, and a concurrency group's `max` and a limiter's rate and concurrency hold across hosts.
`WORKFLOWS_CLOCK=local` (each runner deciding on its own clock) makes these fail."""

from __future__ import annotations

import datetime as dt
import itertools

import pytest

from tests.support import wait_for

from . import flows
from . import ledger as rules
from .bed import CRON_REGISTRY, HOSTS
from .checks import assert_runs_correct, assert_skews, chain_steps, said, settle

SKEWS = {"h1": 120, "h2": 0, "h3": -120}
ALIGNED = dict.fromkeys(HOSTS, 0)
RUNS = 30
LATE = 3.0  # seconds after its fire time a scheduled run's step may begin (a busy 2-core machine)


def test_skewed_clocks__three_runners_drain_runs_correctly(bed):
    for host, skew in SKEWS.items():  # the fault itself: wall clock shifted, monotonic not
        wall, mono = bed.probe_clock(host, skew)
        assert abs(wall - skew) < 1.5 and abs(mono) < 1.0, (host, skew, wall, mono)
    bed.runners(SKEWS)
    keys = [f"sk{i:02d}" for i in range(RUNS)]
    bed.start("chain", [[k] for k in keys], {"steps": 3, "work": 0.1})
    assert_runs_correct(bed, chain_steps(dict.fromkeys(keys, 3)))
    assert bed.ledger().hosts() == set(HOSTS), f"not every runner claimed work: {bed.ledger().hosts()}"
    assert_skews(bed, SKEWS)
    columns = bed.query("SELECT 1 FROM information_schema.columns WHERE column_name = 'clock_offset'")
    if columns:  # the runners' presence says how far off each host's clock is
        offsets = dict(bed.query("SELECT host, clock_offset FROM workflows_runnerpresence"))
        for proc in bed.procs:
            seen = offsets.get(proc.host.netns)
            assert seen is not None and abs(seen - proc.skew) < 2.0, (proc.host.name, proc.skew, offsets)


def test_a_schedule_fires_once_per_fire_time_on_time_across_skewed_hosts(bed):
    bed.runners(SKEWS, registry=CRON_REGISTRY)
    fired = settle(lambda: bed.statuses("tick")["completed"] >= 5, 40)
    bed.end_processes()  # SIGTERM: nothing fires while the checks read
    rows = bed.query("SELECT key, status FROM workflows_run WHERE workflow = 'tick' ORDER BY key")
    assert fired, f"five scheduled runs did not complete: {rows}\n{said(bed)}"
    fire_times = sorted(dt.datetime.fromisoformat(key[1]) for key, _status in rows)
    assert all(key[0] == "tick" for key, _status in rows)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(fire_times)]
    assert all(gap == 2 for gap in gaps), f"fire times skipped or off the 2 s grid: {gaps}"
    done = {key[1] for key, status in rows if status == "completed"}
    found = bed.ledger()
    once = rules.executed_once(found, [], {fire: ["tick"] for fire in done})
    assert not once, once  # each fire time's run ran its step once
    late = []
    for body in found.bodies:  # on the machine's clock (the database's): never early, never long late
        began = body.begin + bed.wall_minus_mono
        behind = began - dt.datetime.fromisoformat(body.run).timestamp()
        if not -0.2 <= behind <= LATE:
            late.append(f"fire time {body.run} ran on {body.host} {behind:+.1f} s from it")
    assert not late, "\n".join(late)
    [(last,)] = bed.query("SELECT last_fire_at FROM workflows_schedule WHERE name = 'tick'")
    assert last == fire_times[-1]


@pytest.mark.parametrize("skews", [ALIGNED, SKEWS], ids=["aligned", "skewed"])
def test_a_concurrency_group_and_a_limiter_hold_across_hosts(bed, skews):
    bed.runners(skews, concurrency=2)
    grouped = [f"g/gr{i:02d}" for i in range(10)]
    limited = [f"li{i:02d}" for i in range(11)]
    bed.start("grouped", [key.split("/") for key in grouped])
    bed.start("limited", [[key] for key in limited])
    wait_for(lambda: bed.all_completed(len(grouped), "grouped"), 40, "the grouped runs to complete")
    rate = flows.LIMIT.requests_per_minute

    def waiting_a_minute() -> int:  # limited steps told to come back when the minute's window frees
        [(n,)] = bed.query(
            "SELECT count(*) FROM workflows_entry WHERE name = 'call' AND status = 'waiting'"
            " AND wake_at > now() + interval '30 seconds'"
        )
        return n

    settled = settle(lambda: bed.statuses("limited")["completed"] + waiting_a_minute() == len(limited), 30)
    found = bed.ledger()
    in_group = [b for b in found.bodies if b.step == "slot"]
    calls = [b for b in found.bodies if b.step == "call"]
    assert rules.peak(in_group) <= flows.GROUP_MAX, (
        f"group max {flows.GROUP_MAX} broken: peak {rules.peak(in_group)}"
    )
    assert len({b.host for b in in_group}) >= 2, "the group's runs were not shared between hosts"
    assert not rules.executed_once(found, [], {run: ["slot"] for run in grouped})
    assert len(calls) <= rate, f"{len(calls)} limited calls started within a minute (limit {rate}/min)"
    assert rules.peak(calls) <= flows.LIMIT.concurrency, (
        f"limiter concurrency broken: peak {rules.peak(calls)}"
    )
    assert settled and len(calls) == rate, (
        f"{len(calls)} calls, statuses {dict(bed.statuses('limited'))}, {waiting_a_minute()} waiting"
        f" for the window\n{said(bed)}"
    )
    [(slots,)] = bed.query(
        "SELECT count(*) FROM workflows_limiterslot WHERE limiter = %s", (flows.LIMIT.name,)
    )
    assert slots == rate
