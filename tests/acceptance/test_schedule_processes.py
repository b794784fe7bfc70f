"""Two real runner processes over one database and a schedule every 2 seconds: every fire time
starts exactly one run, and none is skipped."""

from __future__ import annotations

import datetime as dt
import itertools
import signal

from tests.support import wait_for
from workflows.models import Run, Schedule


def test_two_runners__each_fire_time_starts_exactly_one_run(runners, monkeypatch):
    monkeypatch.setattr(
        runners,
        "env",
        lambda env=runners.env: {**env(), "WORKFLOWS_REGISTRIES": "tests.acceptance.sched_flows.registry"},
    )
    procs = [runners.start(), runners.start()]
    wait_for(
        lambda: Run.objects.filter(workflow="tick", status="completed").count() >= 6,
        timeout=60,
        what="six scheduled runs to complete",
    )
    for proc in procs:
        runners.wait_up(proc)  # one of them may have fired all six before the other was up
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(20) == 0
    ledger = runners.ledger()
    runs = list(Run.objects.filter(workflow="tick"))
    fire_times = sorted(dt.datetime.fromisoformat(r.key[1]) for r in runs)
    assert all(r.key[0] == "tick" for r in runs)
    assert len(set(fire_times)) == len(runs)  # one run per fire time
    assert all(b - a == dt.timedelta(seconds=2) for a, b in itertools.pairwise(fire_times))  # none missed
    for run in runs:
        if run.status == "completed":
            assert ledger[f"{run.key[1]} tick"] == 1, run.key
    row = Schedule.objects.get(name="tick")
    assert row.last_fire_at == fire_times[-1] and row.next_fire_at == fire_times[-1] + dt.timedelta(seconds=2)
    assert not row.gone and not row.paused
