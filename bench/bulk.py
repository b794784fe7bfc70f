"""Bulk cancel of 10,000 runs on PostgreSQL, and its effect on a running runner's step latency
(issue 33, item 3).

In a PostgreSQL database of its own (`bench_bulk`, created and dropped), it parks N runs on a
queue wait (inserted as waiting runs, in one bulk INSERT), starts a real runner
(`manage.py runworkflows`) and feeds it a steady trickle of one-step runs (`--rate` a second).
Then it starts `bulk cancel` of the N parked runs; the runner's housekeeping claims the
operation and executes it in batches of WORKFLOWS["BULK_BATCH"] (one UPDATE and one INSERT of
audit entries per batch), then finishes each cancelled run as its claims pick them up.

It prints the operation's time and rate, the time until every parked run is cancelled, and the
trickle's latency (a run's start to its end, p50/p95) before, while the operation executes, while
the runner finishes the cancelled runs, and after.

    .venv/bin/python bench/bulk.py [--runs 10000] [--rate 20] [--batch 200] [--pace 10] [--keep]
    .venv/bin/python bench/bulk.py --pace 0     # the same, the operation not paced to the runner
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["BENCH_PG_DATABASE"] = os.environ.get("BENCH_BULK_DATABASE", "bench_bulk")

from bench._common import database_url, progress  # noqa: E402

REGISTRY = "bench._bulk_flows.registry"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)] if ordered else float("nan")


def prepare() -> None:
    import psycopg

    server, name = database_url("postgres").rsplit("/", 1)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name}")
        conn.execute(f"CREATE DATABASE {name}")
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env(), check=True)


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    out.update(
        DATABASE_URL=database_url("postgres"), WORKFLOWS_REGISTRIES=REGISTRY,
        DJANGO_SETTINGS_MODULE="config.settings", LOG_LEVEL="WARNING", PYTHONUNBUFFERED="1",
    )  # fmt: skip
    return out


def park(n: int) -> None:
    """N runs of `parked` as a runner leaves them: waiting on a queue, no wake time."""
    from django.utils import timezone

    from workflows.core.keys import key_identity
    from workflows.models import Run

    now = timezone.now()
    rows = []
    for i in range(n):
        text, digest = key_identity([f"p{i}"])
        rows.append(
            Run(
                workflow="parked",
                key=[f"p{i}"],
                key_text=text,
                key_hash=digest,
                status="waiting",
                created_at=now,
                updated_at=now,
                transitioned_at=now,
                started_at=now,
            )
        )
    Run.objects.bulk_create(rows, batch_size=2000)


class Trickle(threading.Thread):
    """Starts a `tick` run every 1/rate seconds until stopped."""

    def __init__(self, rate: float) -> None:
        super().__init__(daemon=True)
        self.rate, self.stop, self.n = rate, threading.Event(), 0

    def run(self) -> None:
        from django.db import connection

        from workflows import conf

        client = conf.registry().client("tick")
        next_at = time.monotonic()
        while not self.stop.is_set():
            client.get_or_create([f"t{self.n}"])
            self.n += 1
            next_at += 1 / self.rate
            time.sleep(max(0.0, next_at - time.monotonic()))
        connection.close()


def latencies(since: dt.datetime, until: dt.datetime) -> list[float]:
    from workflows.models import Run

    rows = Run.objects.filter(
        workflow="tick", created_at__gte=since, created_at__lt=until, status="completed"
    )
    return [(f - c).total_seconds() for c, f in rows.values_list("created_at", "finished_at")]


def line(name: str, values: list[float]) -> str:
    if not values:
        return f"  {name:<28} no runs"
    p50, p95 = percentile(values, 0.5) * 1000, percentile(values, 0.95) * 1000
    return f"  {name:<28} n={len(values):<5} p50 {p50:7.1f} ms   p95 {p95:7.1f} ms"


def wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {what}")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=20.0, help="tick runs started a second")
    parser.add_argument("--batch", type=int, default=200, help="WORKFLOWS_BULK_BATCH")
    parser.add_argument(
        "--pace", type=float, default=10.0, help="WORKFLOWS_BULK_PACE_SECONDS (0: the operation is not paced)"
    )
    parser.add_argument("--phase", type=float, default=10.0, help="seconds of trickle before and after")
    parser.add_argument("--keep", action="store_true", help="keep the database")
    args = parser.parse_args()

    progress("preparing bench_bulk")
    prepare()
    os.environ.update(env())
    import django

    django.setup()
    from django.conf import settings
    from django.utils import timezone

    from workflows.bulk import control
    from workflows.models import BulkOperation, Run

    settings.WORKFLOWS["BULK_BATCH"] = args.batch
    park(args.runs)
    runner_env = {
        **env(),
        "WORKFLOWS_BULK_BATCH": str(args.batch),
        "WORKFLOWS_BULK_PACE_SECONDS": str(args.pace),
    }
    runner = subprocess.Popen(
        [sys.executable, "manage.py", "runworkflows", "--concurrency", "16"], cwd=ROOT, env=runner_env,
    )  # fmt: skip
    trickle = Trickle(args.rate)
    try:
        trickle.start()
        time.sleep(3)  # the runner is up and the trickle steady
        before = timezone.now()
        time.sleep(args.phase)
        progress(f"bulk cancel of {args.runs} parked runs")
        t0 = time.monotonic()
        op = control.start("cancel", {"workflow": "parked"}, actor="bench", reason="bench")
        started = time.monotonic() - t0
        wait(lambda: BulkOperation.objects.get(id=op.id).finished, 600, "the operation")
        op = BulkOperation.objects.get(id=op.id)
        wait(
            lambda: not Run.objects.filter(workflow="parked").exclude(status="cancelled").exists(),
            900,
            "cancels",
        )
        drained = timezone.now()
        time.sleep(args.phase)
        after = timezone.now()
        trickle.stop.set()
        trickle.join()
        time.sleep(2)  # the last ticks finish
    finally:
        runner.terminate()
        runner.wait(30)

    execution = (op.finished_at - op.started_at).total_seconds()
    print(f"bench/bulk.py  {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC  load average {os.getloadavg()}")
    print(
        f"PostgreSQL; {args.runs} waiting runs; batch {args.batch}; pace {args.pace:g} s"
        f"{' (not paced)' if not args.pace else ''}; trickle {args.rate:g} one-step runs/s"
    )
    print(f"start (snapshot of {op.total} runs): {started:.2f} s")
    print(f"operation executed: {execution:.2f} s = {op.done / execution:,.0f} runs/s "
          f"({op.done} done, {op.skipped} skipped, {op.failed} failed)")  # fmt: skip
    print(
        f"until every run ended cancelled (runner finishing them): {(drained - op.created_at).total_seconds():.1f} s"
    )
    print("trickle latency, a run's start to its end:")
    print(line("before", latencies(before, op.created_at)))
    print(line("while the operation executes", latencies(op.started_at, op.finished_at)))
    print(line("while runs end cancelled", latencies(op.finished_at, drained)))
    print(line("after", latencies(drained, after)))
    if not args.keep:
        from django.db import connections

        connections.close_all()
        drop()


def drop() -> None:
    import psycopg

    server, name = database_url("postgres").rsplit("/", 1)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
