"""Where send -> first step goes, phase by phase, on PostgreSQL (its own database
`bench_send_path`, created and dropped here). Prints figures; never a timed test.

    .venv/bin/python bench/send_path.py              # 60 sends each way, about 1 min
    .venv/bin/python bench/send_path.py --sends 200

N runs wait on a queue in one idle `runworkflows --concurrency 20` process that notes when each
phase begins and ends (`bench/_marking_runner.py`: wrappers around the store's calls, nothing
else changed). Each run in turn gets a message from this process (`handle.send`, as
`bench/_procs.send_latency` sends it) and its first step records the wall-clock time it started;
the first WARMUP sends are left out.
Every phase is printed as the median, p90 and p99 of when it ended, in ms after the send began,
and the median and p90 of how long it took: the send returning, the runner's NOTIFY arriving, the
claim, the resumed run's read (history and messages), the execution starting, and the first step
starting. Two ways, one runner process each, one after the other: the claim and the read sent
from the runner's event loop (WORKFLOWS["CONNECTOR"] "postgres-loop", as now), and through its
database threads ("postgres-loop-thread-reads", bench/_connectors.py: the step commits still from
the loop), where the time spent in the thread is shown apart.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("BENCH_PG_DATABASE", "bench_send_path")

from bench._common import BENCH_VAR, bench_env, progress, setup_django, wait_until
from bench._db import create_database, create_pending_runs, drop_database

WARMUP = 5  # first sends left out: a new connection prepares its statements

# (label, the mark that ends it, the mark that starts it: None for the send's start); the "...
# in its database thread" phases only when the call went through a thread
PHASES = [
    ("send returns", "sent", None),
    ("NOTIFY reaches the runner", "notify", None),
    ("the runner's loop wakes and claims", "aclaim>", "notify"),
    ("claim, from the event loop", "aclaim<", "aclaim>"),
    ("... of which in its database thread", "claim<", "claim>"),
    ("resumed run's read, from the event loop", "aload_resume<", "aload_resume>"),
    ("... of which in its database thread", "load_resume<", "load_resume>"),
    ("execution starts", "execute>", "aload_resume<"),
    ("first step starts", "step", "execute>"),
]

IN_A_THREAD = {"claim<", "load_resume<"}
WAYS = {
    "claim and read from the event loop": {"CONNECTOR": "postgres-loop"},
    "claim and read through the database threads": {"CONNECTOR": "postgres-loop-thread-reads"},
}


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(sends: int, settings: dict[str, str], name: str) -> list[dict[str, float]]:
    """Per send: each mark's time in seconds after the send began (the first of each kind that
    came after it)."""
    from bench._procs import RunnerProcess
    from workflows import conf
    from workflows.models import Entry, Run

    marks_path = BENCH_VAR / "send_path.marks"
    marks_path.unlink(missing_ok=True)
    sends += WARMUP
    ids = create_pending_runs("bench_waiter", [[f"{name}-{i}"] for i in range(sends)])
    runner = RunnerProcess("postgres", name, settings=settings, marks_path=marks_path)
    out = []
    try:
        runner.wait_started()
        wait_until(
            lambda: Run.objects.filter(id__in=ids, status="waiting").count() == sends,
            timeout=120,
            what="the waits",
        )
        time.sleep(0.5)
        client = conf.registry().client("bench_waiter")
        for i, run_id in enumerate(ids):
            handle = client.get_by_id(run_id)
            first = Entry.objects.filter(run_id=run_id, name="first").values_list("output", flat=True)
            seen = marks_path.stat().st_size
            t0 = time.time()
            handle.send("start", {})
            sent = time.time()
            started = wait_until(first.first, timeout=60, what="the first step", interval=0.002)
            wait_until(lambda rid=run_id: Run.objects.filter(id=rid, status="completed").exists(), timeout=60,
                       what="the run", interval=0.005)  # fmt: skip
            time.sleep(0.1)  # idle again before the next send
            with open(marks_path) as f:
                f.seek(seen)
                lines = [line.split() for line in f.read().splitlines()]
            row = {"sent": sent - t0, "step": started - t0}
            for phase, at in lines:
                row.setdefault(phase, float(at) - t0)
            if i >= WARMUP:
                out.append(row)
            if (i + 1) % 20 == 0:
                progress(f"{i + 1} sends")
    finally:
        runner.stop()
    return out


def report(way: str, rows: list[dict[str, float]]) -> str:
    lines = [
        f"### {way}: {len(rows)} sends",
        "",
        "| phase | ends, median ms after the send began | p90 | p99 | takes, median ms | p90 |",
        "|---|---|---|---|---|---|",
    ]
    needed = [(end, start) for _l, end, start in PHASES if end not in IN_A_THREAD]
    complete = [r for r in rows if all(end in r and (start is None or start in r) for end, start in needed)]
    for label, end, start in PHASES:
        if not complete or not all(end in r for r in complete):
            lines.append(f"| {label} | - | - | - | - | - |")  # not through a thread
            continue
        ends = [r[end] * 1000 for r in complete]
        takes = [(r[end] - (r[start] if start else 0.0)) * 1000 for r in complete]
        lines.append(
            f"| {label} | {statistics.median(ends):.2f} | {_percentile(ends, 0.9):.2f} | "
            f"{_percentile(ends, 0.99):.2f} | {statistics.median(takes):.2f} | {_percentile(takes, 0.9):.2f} |"
        )
    lines.append(f"\n{len(rows) - len(complete)} of {len(rows)} sends lacked a mark (left out)")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sends", type=int, default=60)
    args = parser.parse_args()
    create_database("postgres")
    try:
        os.environ.update(bench_env("postgres"))
        setup_django()
        load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
        tables = [
            report(way, measure(args.sends, settings, f"send-path-{n}"))
            for n, (way, settings) in enumerate(WAYS.items())
        ]
        load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
        from django.db import connections

        connections.close_all()
    finally:
        drop_database("postgres")
    print(
        f"Send -> first step, phase by phase (PostgreSQL); date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"load average at start {load_start}, at end {load_end}\n"
    )
    print("\n\n".join(tables))


if __name__ == "__main__":
    main()
