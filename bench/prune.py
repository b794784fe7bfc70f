"""Does pruning a large history slow the hot path? (issue 14)

In a PostgreSQL database of its own (`bench_prune`, created and dropped), it fills the engine's
tables with old finished runs in a few INSERT ... SELECT generate_series statements (by default
100,000 completed runs of 10 steps: 1,000,000 entries, 1,000,000 attempts, 100,000 events and
messages), then measures the two statements every step pays, one store call each:

- claim: `DjangoStore.claim` of one new pending run (the runner's claim query);
- step commit: `DjangoStore.commit` of one recorded step with its attempt;

in four phases: before any prune, during `manage.py prune` (a separate process, so the two share
the database and the cores but not the GIL), right after it (autovacuum has the dead rows to
clean), and after an explicit VACUUM ANALYZE of the engine's tables. It prints p50/p99 per phase and the
prune's rate (runs and entries deleted per second). Each cycle also starts the run and completes
it (not timed), as a runner would.

    .venv/bin/python bench/prune.py [--runs 100000] [--steps 10] [--batch 100] [--samples 400] [--keep]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["BENCH_PG_DATABASE"] = os.environ.get("BENCH_PRUNE_DATABASE", "bench_prune")

from bench._common import database_url, progress, stats_ms  # noqa: E402
from bench._history import fill, history_arguments, in_own_database  # noqa: E402

TABLES = ("workflows_run", "workflows_entry", "workflows_attempt", "workflows_event", "workflows_message")
RETENTION_DAYS = 30  # and are kept this long: every one of them is due


class HotPath:
    """One cycle as a runner lives it: start a run, claim it, commit a step, complete it. Only
    the claim and the step commit are timed."""

    def __init__(self) -> None:
        from workflows.storage.django import DjangoStore

        self.store = DjangoStore()
        self.owner = f"bench-{uuid.uuid4().hex[:8]}"
        self.n = 0

    def cycle(self) -> tuple[float, float]:
        from django.utils import timezone

        from workflows.core.new_run import NewRun
        from workflows.core.records import AttemptWrite, Commit, EntryWrite, Transition

        self.n += 1
        now = timezone.now()
        self.store.get_or_create_run(
            NewRun(workflow="live", key=[f"{self.owner}-{self.n}"], version="", initial_state={}, now=now)
        )
        started = time.perf_counter()
        [run] = self.store.claim(owner=self.owner, workflows=["live"], limit=1, lease_seconds=30, now=now)
        claim = time.perf_counter() - started
        now = timezone.now()
        step = EntryWrite(
            id=None, scope="", position=0, name="step", kind="step", status="completed",
            output={"ok": True}, started_at=now, finished_at=now, attempts=1,
        )  # fmt: skip
        attempt = AttemptWrite(number=1, started_at=now, finished_at=now, outcome="ok")
        started = time.perf_counter()
        self.store.commit(run_id=run.id, owner=self.owner, commit=Commit(entries=[(step, attempt)]), now=now)
        commit = time.perf_counter() - started
        done = Commit(transition=Transition(status="completed", result=True))
        self.store.commit(run_id=run.id, owner=self.owner, commit=done, now=timezone.now())
        return claim, commit


def measure(hot: HotPath, samples: int | None = None, while_running: subprocess.Popen | None = None):
    claims, commits = [], []
    while (samples is not None and len(claims) < samples) or (
        while_running is not None and while_running.poll() is None
    ):
        claim, commit = hot.cycle()
        claims.append(claim)
        commits.append(commit)
    return stats_ms(claims), stats_ms(commits)


def child(args: argparse.Namespace) -> None:
    os.environ["DATABASE_URL"] = database_url("postgres")
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.db import connection

    load_start = f"{os.getloadavg()[0]:.1f}"
    fill_seconds = fill(args.runs, args.steps)
    hot = HotPath()
    measure(hot, samples=50)  # warm up: connections, plans, caches
    progress("measuring before the prune")
    before = measure(hot, samples=args.samples)

    env = {
        **os.environ,
        "WORKFLOWS_RETENTION_COMPLETED_DAYS": str(RETENTION_DAYS),
        "WORKFLOWS_PRUNE_BATCH": str(args.batch),
    }
    progress(f"pruning {args.runs:,} runs in batches of {args.batch} (manage.py prune), measuring meanwhile")
    started = time.perf_counter()
    prune = subprocess.Popen(
        [sys.executable, "manage.py", "prune"], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True
    )
    during = measure(hot, while_running=prune)
    out, _ = prune.communicate()
    prune_seconds = time.perf_counter() - started
    if prune.returncode != 0:
        raise SystemExit(f"manage.py prune failed ({prune.returncode}):\n{out}")
    progress("measuring after the prune")
    after = measure(hot, samples=args.samples)
    progress("VACUUM ANALYZE of the engine's tables, then measuring again")
    started = time.perf_counter()
    with connection.cursor() as cursor:
        cursor.execute(f"VACUUM ANALYZE {', '.join(TABLES)}")
    vacuum_seconds = time.perf_counter() - started
    vacuumed = measure(hot, samples=args.samples)
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM workflows_entry e JOIN workflows_run r ON r.id = e.run_id"
                       " WHERE r.workflow = 'old'")  # fmt: skip
        left = cursor.fetchone()[0]

    entries = args.runs * args.steps
    print()
    print(f"bench/prune.py on PostgreSQL: {args.runs:,} old runs x {args.steps} steps = {entries:,} entries")
    print(f"  + {entries:,} attempts, {args.runs:,} events, {args.runs:,} messages; batch {args.batch} runs")
    print(
        f"  fill: {sum(fill_seconds.values()):.1f}s ({', '.join(f'{k} {v:.1f}s' for k, v in fill_seconds.items())})"
    )
    print()
    print(
        f"  {'phase':<8} {'n':>6} {'claim p50':>10} {'claim p99':>10} {'commit p50':>11} {'commit p99':>11}"
    )
    phases = (("before", before), ("during", during), ("after", after), ("vacuumed", vacuumed))
    for name, (claim, commit) in phases:
        print(
            f"  {name:<9} {claim['n']:>6} {claim['median_ms']:>8.2f}ms {claim['p99_ms']:>8.2f}ms"
            f" {commit['median_ms']:>9.2f}ms {commit['p99_ms']:>9.2f}ms"
        )
    print()
    print(f"  prune (manage.py prune, wall {prune_seconds:.1f}s, old entries left: {left}):")
    for line in out.strip().splitlines():
        if not line.endswith(("forever", "last one", f"kept {RETENTION_DAYS} days")):
            print(f"    {line.strip()}")
    print(
        f"    = {args.runs / prune_seconds:,.0f} runs/s, {entries / prune_seconds:,.0f} entries/s (wall, with the process start-up)"
    )
    print(f"  VACUUM ANALYZE afterwards (what autovacuum does in the background): {vacuum_seconds:.1f}s")
    print(f"  load average at the start / the end: {load_start} / {os.getloadavg()[0]:.1f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    history_arguments(parser, runs=100_000)
    parser.add_argument("--batch", type=int, default=100, help="runs per prune transaction (default 100)")
    parser.add_argument("--samples", type=int, default=400, help="cycles measured before and after")
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    return in_own_database(__file__, argv, args.keep)


if __name__ == "__main__":
    raise SystemExit(main())
