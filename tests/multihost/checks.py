"""The checks every multi-host test makes once its runs are done, from the database and the ledger
(definitions in tests/multihost/ledger.py), with the runners' logs in the failure message."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from . import ledger as rules
from .bed import Bed, Proc


def said(bed: Bed, tail: int = 4000) -> str:
    """The bed's processes' output (the end of each), and the faults, for a failure message."""
    parts = [f"faults: {bed.faults}"]
    for proc in bed.procs:
        parts.append(f"--- {proc.host.name} pid {proc.pid} skew {proc.skew} ({proc.log.name}) ---")
        parts.append(proc.output()[-tail:])
    return "\n".join(parts)


def settle(predicate: Callable[[], Any], timeout: float) -> bool:
    """Poll `predicate` until true or `timeout` seconds: False instead of failing, so the test's
    own assertions say what went wrong (a run stuck, a step run twice) rather than "timed out"."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return bool(predicate())


def chain_steps(runs: dict[str, int]) -> dict[str, list[str]]:
    """The steps each chain run (key joined by "/") has: s0 ... s<n-1>."""
    return {run: [f"s{i}" for i in range(n)] for run, n in runs.items()}


def assert_runs_correct(bed: Bed, steps: dict[str, list[str]], timeout: float = 60) -> None:
    """Every run completes; every step is recorded once and completed; in the ledger each step
    ran once apart from bodies cut by a fault, each side effect happened once likewise, no two
    runners were in one run at once (apart from the excused overlap), and no faulted runner began
    a body of a run after it had been taken over."""
    done = settle(lambda: bed.all_completed(len(steps)), timeout)
    assert done, f"not every run completed: {dict(bed.statuses())}\n{said(bed)}"
    recorded = bed.recorded_steps()
    wrong = {
        run: recorded.get(run)
        for run, names in steps.items()
        if recorded.get(run) != [(name, "completed") for name in names]
    }
    assert not wrong, f"runs whose recorded steps are not each step once, completed: {wrong}"
    found = bed.ledger()
    problems = (
        rules.executed_once(found, bed.faults, steps)
        + rules.side_effects_once(found, bed.faults, steps)
        + rules.overlaps(found, bed.faults)
        + rules.began_after_takeover(found, bed.faults)
    )
    assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} problems)\n{said(bed)}"


def assert_no_traceback(proc: Proc) -> None:
    output = proc.output()
    assert "Traceback" not in output, f"{proc.host.name} logged a traceback:\n{output[-6000:]}"


def assert_skews(bed: Bed, expected: dict[str, int], slack: float = 2.0) -> None:
    """Each host's bodies saw the wall clock its runner was given: the fault really was in place."""
    seen = rules.skews(bed.ledger(), bed.wall_minus_mono)
    wrong = {
        h: round(seen.get(h, float("nan")), 2)
        for h, s in expected.items()
        if not abs(seen.get(h, 1e9) - s) <= slack
    }
    assert not wrong, f"the runners' wall clocks were not skewed as set: {wrong} (expected {expected})"
