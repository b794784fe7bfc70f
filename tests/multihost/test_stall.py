"""A runner frozen (SIGSTOP) past its lease while it holds runs, then woken (SIGCONT); and one
killed (SIGKILL) mid-step. The others take its runs over; every run completes with each step
recorded once; two runners are never in one run at once, apart from the one step body the frozen
runner was inside; and the woken runner begins no step of a run that was taken from it."""

from __future__ import annotations

import time

from tests.support import wait_for

from .bed import LEASE, Bed, Proc
from .checks import assert_runs_correct, chain_steps
from .ledger import Fault

RUNS = 18


def in_gap(bed: Bed, proc: Proc, fresh: float) -> str | None:
    """A run `proc` is pausing in between two steps now (its pause began under `fresh` s ago)."""
    found = bed.ledger()
    runner, now = f"{proc.host.name}:{proc.pid}", time.monotonic()
    begun = {(b.run, b.step) for b in found.bodies if b.runner == runner}
    for run, step, who, at in reversed(found.gaps):
        if who == runner and now - at < fresh and (run, step) not in begun:
            return run
    return None


def in_body(bed: Bed, proc: Proc, fresh: float) -> str | None:
    """A run `proc` is inside a step body of now (begun under `fresh` s ago, not ended)."""
    now = time.monotonic()
    for body in reversed(bed.ledger().bodies):
        if (
            body.runner == f"{proc.host.name}:{proc.pid}"
            and body.end == float("inf")
            and now - body.begin < fresh
        ):
            return body.run
    return None


def taken_over(bed: Bed, proc: Proc, run: str, since: float) -> bool:
    return any(b.run == run and b.host != proc.host.name and b.begin >= since for b in bed.ledger().bodies)


def freeze_in_gap(bed: Bed, victim: Proc, tries: int = 5) -> tuple[str, Fault, list[str]]:
    """SIGSTOP `victim` while it pauses between two steps of a run it holds. On a loaded machine
    the pause may end between the look and the signal: then it is woken and tried again (a short
    stop, recorded as a fault like any other)."""
    for _ in range(tries):
        run = wait_for(lambda: in_gap(bed, victim, 0.6), 20, "h1 to pause between two steps of a run")
        fault = bed.fault(victim, "stop")
        held = bed.held_by(victim)
        if run in held and in_gap(bed, victim, 5) == run:  # frozen between two steps, holding the run
            return run, fault, held
        bed.undo(victim, fault)
    raise AssertionError(f"h1 was never frozen between two steps in {tries} tries")


def test_a_runner_frozen_past_its_lease__the_others_take_over_and_it_starts_nothing_after(bed):
    victim, *_others = bed.runners()
    keys = [f"st{i:02d}" for i in range(RUNS)]
    state = {"steps": 3, "work": 0.1, "gap": 1.0, "gap_hosts": ["h1"], "gap_before": ["s1", "s2"]}
    bed.start("chain", [[k] for k in keys], state)
    run, fault, held = freeze_in_gap(bed, victim)
    wait_for(
        lambda: time.monotonic() - fault.start > 2.5 * LEASE and not set(held) & set(bed.held_by(victim)),
        30,
        "the other runners to take over every run of the frozen one, 2.5 leases on",
    )
    bed.undo(victim, fault)
    assert_runs_correct(bed, chain_steps(dict.fromkeys(keys, 3)))
    assert taken_over(bed, victim, run, fault.start)
    assert victim.alive()


def test_a_runner_killed_mid_step__the_others_take_over_once_its_lease_lapses(bed):
    victim, *_others = bed.runners()
    keys = [f"kl{i:02d}" for i in range(RUNS)]
    bed.start("chain", [[k] for k in keys], {"steps": 3, "work": 0.4})
    run = wait_for(lambda: in_body(bed, victim, 0.2), 20, "h1 to be inside a step body")
    fault = bed.fault(victim, "kill")
    assert_runs_correct(bed, chain_steps(dict.fromkeys(keys, 3)))
    assert taken_over(bed, victim, run, fault.start)
