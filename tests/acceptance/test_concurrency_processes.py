"""Three real runner processes, each with room for one run, share one concurrency group of max 2:
every run records when its work started and ended, and the peak overlap is exactly 2: never more
(three processes had room for three, so the database is what holds them to two), and it did reach
2, which one process of capacity 1 cannot do (the limit is not a lock of one, and the runs were
shared between processes). Capacity 1 makes the sharing certain: with room for several, whichever
process frees a slot may claim the next run before the others look, and one process may run them
all."""

from __future__ import annotations

import signal

from tests.support import wait_for
from workflows.models import Run, RunnerPresence
from workflows.storage.django import DjangoStore

from .conc_flows import registry

RUNS = 10


def _peak(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(start, 1) for start, _end in spans] + [(end, -1) for _start, end in spans])
    inside = peak = 0
    for _at, step in edges:  # at equal times an end (-1) sorts before a start
        inside += step
        peak = max(peak, inside)
    return peak


def test_three_runners__a_group_of_max_2_never_runs_3_at_once(runners, monkeypatch):
    monkeypatch.setattr(
        runners,
        "env",
        lambda env=runners.env: {**env(), "WORKFLOWS_REGISTRIES": "tests.acceptance.conc_flows.registry"},
    )
    procs = [runners.start("--concurrency", "1") for _ in range(3)]
    wait_for(lambda: RunnerPresence.objects.count() == 3, timeout=30, what="three runners to register")
    client = registry.client("slot", store=DjangoStore())
    for i in range(RUNS):
        client.get_or_create([f"r{i:02d}"])
    wait_for(
        lambda: Run.objects.filter(workflow="slot", status="completed").count() == RUNS,
        timeout=60,
        what=f"{RUNS} runs to complete",
    )
    for proc in procs:
        proc.send_signal(signal.SIGTERM)
    for proc in procs:
        assert proc.wait(20) == 0

    lines = [line.split() for line in (runners.workdir / "ledger.log").read_text().splitlines()]
    starts = {key: float(at) for key, kind, at, _pid in lines if kind == "start"}
    ends = {key: float(at) for key, kind, at, _pid in lines if kind == "end"}
    assert sorted(starts) == sorted(ends) == [f"r{i:02d}" for i in range(RUNS)]  # each ran once
    spans = [(starts[key], ends[key]) for key in starts]
    assert _peak(spans) == 2
    pids = {pid for _key, kind, _at, pid in lines if kind == "start"}
    assert len(pids) >= 2, "the runs were not shared between the runner processes"
