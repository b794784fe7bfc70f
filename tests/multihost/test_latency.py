"""A runner 20 ms away from its database (each way, through the bed's delaying proxy) works
beside two near ones: its runs complete, each step once, never two runners in one run."""

from __future__ import annotations

import time

import psycopg

from .checks import assert_no_traceback, assert_runs_correct, chain_steps

DELAY = 0.02
RUNS = 24


def test_a_runner_behind_20ms_each_way_still_does_its_work_correctly(bed):
    far = bed.runner("h1", delay=DELAY)
    [proxy] = bed.proxies
    started = time.monotonic()
    with psycopg.connect(f"postgres://postgres@{far.host.gateway}:{proxy.port}/app", autocommit=True) as conn:
        began = time.monotonic()
        conn.execute("SELECT 1").fetchone()
        round_trip = time.monotonic() - began
    assert round_trip >= 2 * DELAY, f"the proxy did not delay: a round trip took {round_trip * 1000:.1f} ms"
    assert time.monotonic() - started < 5
    near = [bed.runner("h2"), bed.runner("h3")]
    keys = [[f"lat{i:02d}"] for i in range(RUNS)]
    bed.start("chain", keys, state={"steps": 3, "work": 0.1})
    assert_runs_correct(bed, chain_steps({f"lat{i:02d}": 3 for i in range(RUNS)}))
    hosts = bed.ledger().hosts()
    assert "h1" in hosts, f"the far runner ran no step: {hosts}"
    assert proxy.connections >= 2 and proxy.bytes > 0  # the runner's connections went through it
    for proc in [far, *near]:
        assert_no_traceback(proc)
