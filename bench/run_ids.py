"""What a run's id costs the WAL beside a large history: random ids (uuid4, as runs had before)
against time-ordered ones (UUID version 7, `workflows.core.ids`, as now). Prints figures; never a
timed test.

    .venv/bin/python bench/run_ids.py [--runs 200000] [--steps 10] [--window 200] [--rounds 2] [--keep]

In a PostgreSQL database of its own (`bench_run_ids`, created and dropped), it writes an old
history with the database itself (`bench/_history.py`: by default 200,000 completed runs of 10
steps, 2,000,000 entries and attempts), then, in alternating windows, runs `--window` 10-step runs
through the real engine in this process (a Runner over the real DjangoStore, each run started
leased to it and executed at once, as `bench/side_by_side.py` starts its in-process runs), their
ids made one way or the other. Each window starts right after a CHECKPOINT, as every window of
a server's life does: the first change to a page after a checkpoint writes the whole page to the
WAL (`full_page_writes`, on by default). It prints, per way, the WAL bytes per step (everything
the 10-step runs wrote, their creation and completion included, over their steps), how much of it
was whole pages (`pg_walinspect`, when the server has it), and the median time of a run.

Why it matters: a run's id leads the run table's primary key and three of the entry table's
indexes. Random ids scatter a window's new runs over every page of those indexes, time-ordered
ones keep them at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["BENCH_PG_DATABASE"] = os.environ.get("BENCH_RUN_IDS_DATABASE", "bench_run_ids")

from bench._common import database_url, progress  # noqa: E402
from bench._history import fill, history_arguments, in_own_database  # noqa: E402

WAYS = ("random (uuid4)", "time-ordered (UUID v7)")


def _id_maker(way: str) -> Callable[[], uuid.UUID]:
    from workflows.core.ids import new_run_id

    return uuid.uuid4 if way == WAYS[0] else new_run_id


def _scalar(sql: str) -> Any:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql)
        return cursor.fetchone()[0]


def _walinspect() -> bool:
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE EXTENSION IF NOT EXISTS pg_walinspect")
        return True
    except Exception:  # not installed on this server, or not a superuser: totals only
        return False


async def _ten_step_runs(keys: list[str]) -> list[float]:
    from bench import _inprocess

    store = _inprocess._make_store()
    runner = _inprocess._runner(store)
    seconds = []
    try:
        for key in keys:
            t0 = time.perf_counter()
            handle = await runner.start("bench_ten", [key])
            await runner.executed(handle.run_id)
            seconds.append(time.perf_counter() - t0)
            if (await handle.ainfo()).status != "completed":
                raise RuntimeError(f"run {key} did not complete")
    finally:
        store.close()
    return seconds


def window(way: str, keys: list[str], steps: int, walinspect: bool) -> dict[str, float]:
    """`keys` 10-step runs after a CHECKPOINT, their ids made `way`: WAL bytes per step (and of it
    whole pages), median ms per run."""
    from bench import _inprocess
    from workflows.storage.django import starts

    starts.new_run_id = _id_maker(way)  # looked up at each run's creation (`starts._new_run`)
    try:
        from django.db import connection

        with connection.cursor() as cursor:
            cursor.execute("CHECKPOINT")
        start = _scalar("SELECT pg_current_wal_lsn()::text")
        seconds = _inprocess._in_loop(_ten_step_runs(keys))
        end = _scalar("SELECT pg_current_wal_lsn()::text")
    finally:
        from workflows.core.ids import new_run_id

        starts.new_run_id = new_run_id
    n_steps = len(keys) * steps
    wal = float(_scalar(f"SELECT pg_wal_lsn_diff('{end}', '{start}')"))
    fpi = None
    if walinspect:
        fpi = float(_scalar(f"SELECT COALESCE(SUM(fpi_size), 0) FROM pg_get_wal_stats('{start}', '{end}')"))
    return {
        "wal_per_step": wal / n_steps,
        "fpi_per_step": None if fpi is None else fpi / n_steps,
        "run_ms": statistics.median(seconds) * 1000,
    }


def child(args: argparse.Namespace) -> None:
    os.environ["DATABASE_URL"] = database_url("postgres")
    os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
    os.environ["WORKFLOWS_REGISTRIES"] = "bench.flows.registry"
    os.environ["LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    load_start = os.getloadavg()[0]
    filled = fill(args.runs, args.steps)
    walinspect = _walinspect()
    window(WAYS[1], [f"warm-{i}" for i in range(20)], 10, walinspect)  # connections, plans, caches
    results: dict[str, list[dict[str, float]]] = {way: [] for way in WAYS}
    for r in range(1, args.rounds + 1):
        for way in WAYS:
            progress(f"round {r}/{args.rounds}: {args.window} 10-step runs, ids {way}")
            keys = [f"r{r}-{WAYS.index(way)}-{i}" for i in range(args.window)]
            results[way].append(window(way, keys, 10, walinspect))
    entries = _scalar("SELECT COUNT(*) FROM workflows_entry")
    print()
    print(
        f"bench/run_ids.py on PostgreSQL ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}): a history of "
        f"{args.runs:,} runs x {args.steps} steps, {entries:,} entries in the end (filled in "
        f"{sum(filled.values()):.0f}s); {args.window} 10-step runs per window, each window after a CHECKPOINT, "
        f"{args.rounds} round(s) of each way alternately; load average {load_start:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end"
    )
    print()
    print("| run ids | WAL bytes per step (rounds) | ... of it whole pages | 10-step run, median |")
    print("|---|---|---|---|")
    for way in WAYS:
        rounds = results[way]
        wal = [r["wal_per_step"] for r in rounds]
        fpi = [r["fpi_per_step"] for r in rounds if r["fpi_per_step"] is not None]
        print(
            f"| {way} | {statistics.median(wal):,.0f} ({', '.join(f'{w:,.0f}' for w in wal)}) | "
            f"{f'{statistics.median(fpi):,.0f}' if fpi else '-'} | "
            f"{statistics.median(r['run_ms'] for r in rounds):.2f} ms |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    history_arguments(parser, runs=200_000)
    parser.add_argument("--window", type=int, default=200, help="10-step runs per window (default 200)")
    parser.add_argument("--rounds", type=int, default=2, help="windows of each way (default 2)")
    args = parser.parse_args(argv)
    if args.child:
        child(args)
        return 0
    return in_own_database(__file__, argv, args.keep)


if __name__ == "__main__":
    raise SystemExit(main())
