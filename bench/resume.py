"""Resume time of a run after a crash, by the size of its history (issue 5's benchmark).

A resume is one execution that loads the history, replays it and reaches the first entry that
must run. Measured here as exactly that: a run parked on a queue wait is woken with no message
(as a restarted runner would find it) and executed once; it replays everything and parks again.

Cases: 10 steps; 10,000 steps in the root scope; a loop of 10,000 one-step iterations kept
whole (history_size=None); the same loop pruned to its last 20 iterations (the default).

    .venv/bin/python bench/resume.py [--db sqlite|postgres|both] [--entries 10000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SQLITE = ROOT / "var" / "bench" / "resume.sqlite3"
PG_SERVER = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
PG_DB = "bench_resume"


def url(db: str) -> str:
    return f"sqlite:///{SQLITE}" if db == "sqlite" else f"{PG_SERVER}/{PG_DB}"


def prepare(db: str) -> None:
    if db == "sqlite":
        SQLITE.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(SQLITE) + suffix).unlink(missing_ok=True)
    else:
        import psycopg

        with psycopg.connect(f"{PG_SERVER}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {PG_DB}")
            conn.execute(f"CREATE DATABASE {PG_DB}")
    env = {**os.environ, "DATABASE_URL": url(db), "LOG_LEVEL": "WARNING"}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True)


def child(db: str, entries: int, repeat: int) -> None:
    os.environ["DATABASE_URL"] = url(db)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from workflows import Loop, queue, setup, workflow
    from workflows.engine.runner import Runner
    from workflows.models import Entry, Run
    from workflows.storage.django import DjangoStore

    async def one(step):
        return 1

    def steps_body(n):
        async def body(ctx):
            for i in range(n):
                await ctx.step(f"s{i}", one)
            await ctx.queue.next("park", names=["never"])

        return body

    def loop_body(n, history_size):
        async def body(ctx):
            async def it(c, i):
                await c.step("s", one)
                if i == n - 1:
                    await c.queue.next("park", names=["never"])
                return Loop.next(i + 1)

            await ctx.loop("l", it, state=0, history_size=history_size)

        return body

    cases = [
        ("10 steps", steps_body(10)),
        (f"{entries:,} steps", steps_body(entries)),
        (f"loop of {entries:,}, kept whole", loop_body(entries, None)),
        (f"loop of {entries:,}, pruned to 20", loop_body(entries, 20)),
    ]
    store = DjangoStore()
    rows = []
    for label, body in cases:
        name = f"case{len(rows)}"
        reg = setup(use={name: workflow(body, queues={"never": queue()})})
        runner = Runner(registry=reg, store=store, watch=False, concurrency=1)
        run = reg.client(name).get_or_create(["r"])

        async def drive(runner=runner):
            await runner.run_due()

        t0 = time.perf_counter()
        asyncio.run(drive())
        build = time.perf_counter() - t0
        stored = Entry.objects.filter(run_id=run.run_id).count()
        times = []
        for _ in range(repeat):
            Run.objects.filter(id=run.run_id).update(wake_at=store_now())
            t0 = time.perf_counter()
            asyncio.run(drive())
            times.append(time.perf_counter() - t0)
            assert Run.objects.get(id=run.run_id).status == "waiting"
        rows.append((label, stored, statistics.median(times) * 1000, max(times) * 1000, build))
        print(f"  built {label} in {build:.1f}s", file=sys.stderr, flush=True)
    print(f"\n{db}: resume time after a crash (median of {repeat}, ms)")
    print(f"  {'history':34} {'entries stored':>15} {'resume median':>14} {'max':>9}")
    for label, stored, median, worst, _build in rows:
        print(f"  {label:34} {stored:>15,} {median:>14.1f} {worst:>9.1f}")


def store_now():
    import datetime as dt

    return dt.datetime.now(dt.UTC)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--child", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.entries, args.repeat)
        return
    for db in ("sqlite", "postgres") if args.db == "both" else (args.db,):
        prepare(db)
        cmd = [
            sys.executable,
            __file__,
            "--child",
            db,
            "--entries",
            str(args.entries),
            "--repeat",
            str(args.repeat),
        ]
        subprocess.run(cmd, cwd=ROOT, env={**os.environ, "LOG_LEVEL": "WARNING"}, check=True)


if __name__ == "__main__":
    main()
