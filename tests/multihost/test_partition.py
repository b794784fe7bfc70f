"""A runner cut off from the database (an iptables blackhole inside its namespace, or its link
down) for over 2 leases while it holds runs, then healed. The others take its runs over; the
checks hold (tests/multihost/checks.py); the healed runner takes new work and logs no traceback.

Its runs pause 5 s before their second step on its host (only there), so when the cut comes it
is between two steps, and that pause ends after the others took the run over: a runner that
does not check its lease before a step would begin one then, and the ledger shows it.

The cut lasts HOLD seconds at least: a statement sent into it waits out TCP's retransmissions,
whose gaps double, so without the engine's bound on an unanswered connection
(DATABASE_TCP_USER_TIMEOUT=0) the healed runner may hear back only as late again as the cut
lasted (seen in CI: it took no new work for 45 s), and misses REJOIN; test_cut_connection.py
shows that bound alone, whatever the phase of the retransmissions."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.support import wait_for

from .bed import LEASE
from .checks import assert_no_traceback, assert_runs_correct, chain_steps
from .test_stall import in_gap, taken_over

RUNS = 15
NEW = 24
BATCHES = 3
HOLD = 20.0  # seconds: the cut's least length
REJOIN = 10.0  # seconds after the heal: the healed runner began a step of a new run by then
GAP = REJOIN  # seconds the new runs pause on h2 and h3


def poll(find: Callable[[], str | None], timeout: float) -> str | None:
    """`find()` until it finds something or `timeout` seconds pass (then None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = find()
        if found is not None:
            return found
        time.sleep(0.05)
    return None


@pytest.mark.parametrize("kind", ["blackhole", "link"])
def test_a_runner_cut_off_then_healed__others_take_over_and_it_rejoins(bed, kind):
    victim, *_others = bed.runners()
    state = {"steps": 3, "work": 0.1, "gap": 5.0, "gap_hosts": ["h1"], "gap_before": ["s1"]}
    keys: list[str] = []
    run = None
    for batch in range(BATCHES):
        # Its pause began under 2 s ago: the pause outlasts the takeover (about a lease after the
        # cut), so a runner with no stall check would begin the next step after it (what the
        # ledger shows). On a loaded machine the other runners may take every run before h1 is
        # seen pausing: another batch then gives it another chance.
        new_keys = [f"{kind[:2]}{batch}-{i:02d}" for i in range(RUNS)]
        bed.start("chain", [[k] for k in new_keys], state)
        keys += new_keys
        run = poll(lambda: in_gap(bed, victim, 2.0), 15)
        if run is not None:
            break
    assert run is not None, f"h1 was never seen pausing between two steps in {BATCHES} batches"
    fault = bed.fault(victim, kind)
    held = bed.held_by(victim)
    assert run in held
    wait_for(
        lambda: time.monotonic() - fault.start > 2.5 * LEASE and not set(held) & set(bed.held_by(victim)),
        30,
        "the other runners to take over every run of the cut-off one, 2.5 leases on",
    )
    wait_for(lambda: time.monotonic() - fault.start > HOLD, HOLD + 1, f"the cut to last {HOLD:.0f} s")
    bed.undo(victim, fault)
    steps = chain_steps(dict.fromkeys(keys, 3))
    assert_runs_correct(bed, steps)
    assert taken_over(bed, victim, run, fault.start)

    # Back on the network, it takes new work within REJOIN. The new runs pause GAP s before their
    # second step on h2 and h3 (not on h1), so those two, with 8 slots, take 16 of them in two
    # waves GAP apart and leave 8 for h1 past REJOIN even when it never comes back.
    assert fault.end is not None
    healed = fault.end
    new = [f"{kind[:2]}-new{i:02d}" for i in range(NEW)]
    bed.start(
        "chain",
        [[k] for k in new],
        {"steps": 3, "work": 0.5, "gap": GAP, "gap_hosts": ["h2", "h3"], "gap_before": ["s1"]},
    )
    begins = wait_for(
        lambda: [
            b.begin for b in bed.ledger().bodies if b.host == "h1" and b.begin > healed and b.run in new
        ],
        45,
        "the healed runner to begin a step of a new run",
    )
    assert min(begins) - healed < REJOIN, (
        f"h1 began a new run's step {min(begins) - healed:.1f} s after the heal"
    )
    assert_runs_correct(bed, {**steps, **chain_steps(dict.fromkeys(new, 3))})
    assert victim.alive()
    assert_no_traceback(victim)
