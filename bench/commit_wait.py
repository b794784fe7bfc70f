"""What a committed insert waits for when the machine's CPUs are busy with work that never
touches the database. Prints figures; never a timed test.

    .venv/bin/python bench/commit_wait.py              # about a minute on 2 cores
    .venv/bin/python bench/commit_wait.py --quick      # a smoke run, not figures to quote

One single-row INSERT on an autocommit connection waiting for its WAL flush (the default), and the
same on a connection with `synchronous_commit = off`, one after the other, 5 ms apart, in its own
database (`bench_commit_wait`, created and dropped here). Measured with the machine idle, then
beside N processes that only spin a CPU (`while True: pass`, one per core by default) started at
each `--nice` level, in interleaved rounds. Over each window the CPUs' and PostgreSQL's disk's
figures (`bench/_machine.py`).

Why: beside busy runners, a commit that waits for its flush took several times longer than one that
does not, while the disk stayed mostly idle (`bench/side_by_side.py`). This separates the CPUs from
the database: no other process writes here, so any wait added beside the spinning processes is
the committing backend waiting for a CPU after its flush, not a queue at the disk or in
PostgreSQL. It is what a runner that keeps every core busy does to the commits of everything on
its machine (a web process's submits, PostgreSQL's other clients); `--nice` tells whether starting
the busy processes at a lower CPU priority gives it back.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg

from bench import _machine
from bench._common import PG_SERVER_URL, progress

DATABASE = os.environ.get("BENCH_COMMIT_WAIT_DATABASE", "bench_commit_wait")
SPIN = "while True: pass"


def niced(nice: int) -> list[str]:
    """The prefix that starts a command at CPU priority `nice` (none for 0)."""
    return ["nice", "-n", str(nice)] if nice else []


def _admin(sql: str) -> None:
    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def window(url: str, samples: int) -> dict[str, Any]:
    """`samples` inserts of each kind, alternately, 5 ms apart: their medians (ms) and the
    machine's figures over the window."""
    timed: dict[str, list[float]] = {"waits": [], "no_wait": []}
    with psycopg.connect(url, autocommit=True) as waits, psycopg.connect(url, autocommit=True) as no_wait:
        no_wait.execute("SET synchronous_commit = off")
        device = _machine.server_data_device(waits)
        before = _machine.snapshot(device)
        for i in range(samples):
            for name, conn in (("waits", waits), ("no_wait", no_wait)):
                t0 = time.perf_counter()
                conn.execute("INSERT INTO bench_commit_wait (v) VALUES (%s)", [i])
                timed[name].append(time.perf_counter() - t0)
                time.sleep(0.005)
        machine = _machine.window(before, _machine.snapshot(device))
    return {name: statistics.median(values) * 1000 for name, values in timed.items()} | {"machine": machine}


def beside_spinners(url: str, samples: int, spinners: int, nice: int) -> dict[str, Any]:
    procs = [subprocess.Popen([*niced(nice), sys.executable, "-c", SPIN]) for _ in range(spinners)]
    try:
        time.sleep(0.3)  # spinning
        return window(url, samples)
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=300, help="inserts of each kind per window")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every condition")
    parser.add_argument("--spinners", type=int, default=os.cpu_count() or 2, help="spinning processes")
    parser.add_argument("--nice", default="0,10", help="comma-separated nice levels of the spinners")
    parser.add_argument("--quick", action="store_true", help="20 samples, 1 round: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.rounds = 20, 1
    levels = [int(v) for v in args.nice.split(",")]
    conditions = ["idle", *(f"nice {n}" for n in levels)]
    url = f"{PG_SERVER_URL}/{DATABASE}"
    _admin(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    _admin(f"CREATE DATABASE {DATABASE}")
    results: dict[str, list[dict[str, Any]]] = {c: [] for c in conditions}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_start = os.getloadavg()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE TABLE bench_commit_wait (id bigserial PRIMARY KEY, v integer NOT NULL)")
        for r in range(1, args.rounds + 1):
            progress(f"round {r}/{args.rounds}: idle")
            results["idle"].append(window(url, args.samples))
            for nice in levels:
                progress(f"round {r}/{args.rounds}: beside {args.spinners} spinning processes at nice {nice}")
                results[f"nice {nice}"].append(beside_spinners(url, args.samples, args.spinners, nice))
    finally:
        _admin(f"DROP DATABASE IF EXISTS {DATABASE} WITH (FORCE)")
    print(report(results, args, started, load_start))
    return 0


def _median(rounds: list[dict[str, Any]], *path: str) -> float | None:
    values = []
    for r in rounds:
        value: Any = r
        for name in path:
            value = value.get(name) if isinstance(value, dict) else None
        if value is not None:
            values.append(value)
    return statistics.median(values) if values else None


def _fmt(value: float | None, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def report(
    results: dict[str, list[dict[str, Any]]], args: argparse.Namespace, started: str, load: Any
) -> str:
    out = [
        f"A committed insert beside processes that only spin a CPU ({started}; {os.cpu_count()} cores; "
        f"load average at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {args.samples} inserts of "
        f"each kind per window, median of {args.rounds} round(s))",
        "",
        "| machine | waits for its flush, median | synchronous_commit off, median | CPUs busy | "
        "disk busy | disk cache flushes/s, ms each |",
        "|---|---|---|---|---|---|",
    ]
    for condition, rounds in results.items():
        spinning = "1 spinning process" if args.spinners == 1 else f"{args.spinners} spinning processes"
        label = "idle" if condition == "idle" else f"{spinning} at {condition}"
        out.append(
            f"| {label} | {_fmt(_median(rounds, 'waits'), 3)} ms | {_fmt(_median(rounds, 'no_wait'), 3)} ms | "
            f"{_fmt(_median(rounds, 'machine', 'cpu_busy_pct'), 0)}% | "
            f"{_fmt(_median(rounds, 'machine', 'disk', 'busy_pct'), 0)}% | "
            f"{_fmt(_median(rounds, 'machine', 'disk', 'flushes_per_s'), 0)}, "
            f"{_fmt(_median(rounds, 'machine', 'disk', 'ms_per_flush'), 3)} |"
        )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
