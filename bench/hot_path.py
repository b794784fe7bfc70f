"""The hot-path changes of issue 10, each measured on and off, interleaved in one invocation on
PostgreSQL (its own database `bench_hot_path`, created and dropped here). Prints figures; never a
timed test.

    .venv/bin/python bench/hot_path.py                 # about 2 minutes on 2 cores
    .venv/bin/python bench/hot_path.py --quick         # a smoke run, not figures to quote

1. Prepared statements (WORKFLOWS["PREPARED_STATEMENTS"]): a step's commit, a run read and a
   history read through the real DjangoStore in this process, alternately with the setting on and
   off (one call each in turn), median ms per call.
2. A lone step commit from the event loop through a runner's store, three ways alternately (one
   commit each in turn), one store per connector: on the store's async connection
   (`PostgresLoop`, as now), through a database thread with the group queue
   (`PostgresThreads`), and through a thread directly (`Threads`): what the hop and the queue
   cost when there is nothing to group.
3. The hop to a database thread: `SELECT 1` from the event loop through the store's thread, and on
   psycopg's async connection (no hop), alternately: the cost of a direction not taken yet.
4. Under load: N runs x 10 steps drained by 2 `runworkflows --concurrency 20` processes, in
   alternate rounds, each with its WORKFLOWS["CONNECTOR"]: commits on the async connection with
   group commit ("postgres-loop", as now), on it without group commit ("postgres-loop-alone",
   bench/_connectors.py), and through the database threads with group commit
   ("postgres-threads"): steps/s
   (from the steps' own timestamps), the runners' CPU per step, and step commits per statement.
5. A claim of 1 run and of 20 over a due backlog of 100, 1,000 and 10,000 runs of 3 workflows (analyzed,
   the claimed runs put back untimed after each claim), three ways alternately: as before (one
   ordered scan of every due run of the runner's workflows, one prepared statement, its commit
   waiting for the disk), the per-workflow pick sent as before, and as now (`store._claim`: the
   per-workflow pick, its generic plan kept, `postgres.GENERIC_PLAN`, and its commit not waiting for
   the disk, `postgres.LAZY_FLUSH`). Median ms per claim.
6. The driver's own wait: one committed single-row INSERT in turn through psycopg's blocking
   connection, its AsyncConnection (as the store's loop connections send), and the same statement's
   bare libpq calls awaited with one `add_reader` per reply; with the commit waiting for the disk
   and with `synchronous_commit = off`: what psycopg's async layers add to a round trip (a
   direction not taken: a hand-written async path for the step commit).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

os.environ.setdefault("BENCH_PG_DATABASE", "bench_hot_path")

from bench._common import bench_env, progress, setup_django
from bench._db import create_database, drop_database
from bench._speed import reference_ms_text

FULL = {
    "calls": 500,
    "runs": 1000,
    "rounds": 2,
    "claims": 300,
    "backlogs": (100, 1000, 10000),
    "limits": (1, 20),
}
QUICK = {"calls": 40, "runs": 60, "rounds": 1, "claims": 20, "backlogs": (100,), "limits": (1, 20)}
CLAIM_WORKFLOWS = ["bench_overhead", "bench_ten", "bench_waiter"]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _step(position: int) -> Any:
    from workflows.core.records import AttemptWrite, Commit, EntryWrite

    entry = EntryWrite(
        id=None, scope="", position=position, name=f"s{position}", kind="step", status="completed",
        output=position, attempts=1,
    )  # fmt: skip
    return Commit(
        entries=[(entry, AttemptWrite(number=1, started_at=_now(), finished_at=_now(), outcome="ok"))]
    )


def _claimed(n: int, prefix: str) -> list[Any]:
    from workflows.core.new_run import NewRun
    from workflows.storage.django import DjangoStore

    store = DjangoStore()
    for i in range(n):
        store.get_or_create_run(
            NewRun(workflow="bench_ten", key=[prefix, str(i)], version="1", initial_state={}, now=_now())
        )
    return store.claim(owner="bench", workflows=["bench_ten"], limit=n, lease_seconds=600, now=_now())


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples[len(samples) // 10 :]) * 1000  # the first tenth warms up


def prepared(calls: int) -> dict[str, dict[str, float]]:
    from django.conf import settings

    from workflows.storage.django import DjangoStore

    store = DjangoStore()
    runs = {True: _claimed(2, "prepared-on"), False: _claimed(2, "prepared-off")}
    for on in (True, False):  # the second run of each has a 10-step history to read
        for position in range(10):
            store.commit(run_id=runs[on][1].id, owner="bench", commit=_step(position), now=_now())
    times: dict[str, dict[bool, list[float]]] = {
        k: {True: [], False: []} for k in ("a step's commit", "a run read", "a 10-step history read")
    }
    base = dict(settings.WORKFLOWS)
    try:
        for position in range(calls):
            for on in (True, False):
                settings.WORKFLOWS = {**base, "PREPARED_STATEMENTS": on}
                run, read = runs[on]
                calls_now = {
                    "a step's commit": lambda r=run, p=position: store.commit(
                        run_id=r.id, owner="bench", commit=_step(p), now=_now()
                    ),
                    "a run read": lambda r=run: store.get_run(r.id),
                    "a 10-step history read": lambda r=read: store.load_history(r.id),
                }
                for name, call in calls_now.items():
                    t0 = time.perf_counter()
                    call()
                    times[name][on].append(time.perf_counter() - t0)
    finally:
        settings.WORKFLOWS = base
    return {name: {"on": _median_ms(t[True]), "off": _median_ms(t[False])} for name, t in times.items()}


LONE_WAYS = {  # label: the connector its store is built with
    "async connection": "postgres-loop",
    "thread, group queue": "postgres-threads",
    "thread, direct": "threads",
}


async def _lone_commits(calls: int, runs: list[Any]) -> dict[str, float]:
    from workflows.storage.django import DjangoStore

    stores = {label: DjangoStore(db_threads=4, connector=name) for label, name in LONE_WAYS.items()}
    times: dict[str, list[float]] = {label: [] for label in LONE_WAYS}
    try:
        for position in range(calls):
            for (label, store), run in zip(stores.items(), runs, strict=True):
                t0 = time.perf_counter()
                await store.acommit(run_id=run.id, owner="bench", commit=_step(position), now=_now())
                times[label].append(time.perf_counter() - t0)
    finally:
        for store in stores.values():
            store.close()
    return {label: _median_ms(t) for label, t in times.items()}


def lone_commits(calls: int) -> dict[str, float]:
    from bench._inprocess import _in_loop

    return _in_loop(_lone_commits(calls, _claimed(len(LONE_WAYS), "lone")))


async def _hops(calls: int) -> dict[str, float]:
    import psycopg
    from django.db import connection

    from workflows.storage.django import DjangoStore
    from workflows.storage.django.notify import _libpq_params

    store = DjangoStore(db_threads=1)

    def select_one() -> None:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")

    params = await store.run_sync(_libpq_params)
    times: dict[str, list[float]] = {"through a database thread": [], "psycopg's async connection": []}
    async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as aconn:
        try:
            for _ in range(calls):
                t0 = time.perf_counter()
                await store.run_sync(select_one)
                times["through a database thread"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await aconn.execute("SELECT 1")
                times["psycopg's async connection"].append(time.perf_counter() - t0)
        finally:
            store.close()
    return {label: _median_ms(t) for label, t in times.items()}


def hops(calls: int) -> dict[str, float]:
    """`SELECT 1` from the event loop, as the runner sends every statement (a hop to one of the
    store's database threads and back) and on psycopg's async connection (no hop): what the hop
    costs, for the direction not taken yet."""
    from bench._inprocess import _in_loop

    return _in_loop(_hops(calls))


DRIVER_WAYS = ("psycopg, blocking", "psycopg's async connection", "bare libpq from the loop")


async def _driver_waits(calls: int, flush: bool) -> dict[str, float]:
    import psycopg

    from workflows.storage.django import DjangoStore
    from workflows.storage.django.notify import _libpq_params

    store = DjangoStore(db_threads=1)
    try:
        params = await store.run_sync(_libpq_params)
    finally:
        store.close()
    insert = "INSERT INTO bench_hot_path_floor (v) VALUES (%s)"
    setting = "SET synchronous_commit = " + ("on" if flush else "off")
    times: dict[str, list[float]] = {way: [] for way in DRIVER_WAYS}
    loop = asyncio.get_running_loop()
    with psycopg.connect(**params, autocommit=True) as sync_conn:
        sync_conn.execute(
            "CREATE TABLE IF NOT EXISTS bench_hot_path_floor (id bigserial PRIMARY KEY, v integer)"
        )
        sync_conn.execute(setting)
        async with await psycopg.AsyncConnection.connect(**params, autocommit=True) as aconn, \
                await psycopg.AsyncConnection.connect(**params, autocommit=True) as bare:  # fmt: skip
            await aconn.execute(setting)
            await bare.execute(setting)
            pg = bare.pgconn
            pg.prepare(b"floor", b"INSERT INTO bench_hot_path_floor (v) VALUES ($1)")
            for i in range(calls + 20):
                timed = []
                t0 = time.perf_counter()
                sync_conn.execute(insert, [i], prepare=True)
                timed.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                await aconn.execute(insert, [i], prepare=True)
                timed.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                pg.send_query_prepared(b"floor", [str(i).encode()])
                pg.flush()
                while True:  # one wait on the socket per reply, as few layers as asyncio allows
                    pg.consume_input()
                    if not pg.is_busy():
                        break
                    ready = loop.create_future()
                    # level-triggered: the callback may run again before the task resumes
                    loop.add_reader(pg.socket, lambda f=ready: f.done() or f.set_result(None))
                    try:
                        await ready
                    finally:
                        loop.remove_reader(pg.socket)
                while (result := pg.get_result()) is not None:
                    if result.status != psycopg.pq.ExecStatus.COMMAND_OK:
                        raise RuntimeError(result.error_message.decode())
                timed.append(time.perf_counter() - t0)
                if i >= 20:  # warm-up
                    for way, elapsed in zip(DRIVER_WAYS, timed, strict=True):
                        times[way].append(elapsed)
        sync_conn.execute("DROP TABLE bench_hot_path_floor")
    return {way: _median_ms(t) for way, t in times.items()}


def driver_waits(calls: int) -> dict[str, dict[str, float]]:
    """One committed single-row INSERT, three ways in turn, its commit waiting for the disk and
    not (`synchronous_commit`): psycopg's blocking connection (which a runner's event loop cannot
    use), its AsyncConnection (as the store's loop connections), and the same statement's bare
    libpq calls awaited with one `add_reader` per reply: what psycopg's async layers add to a
    round trip, for a direction not taken (a hand-written async path for the step commit)."""
    from bench._inprocess import _in_loop

    return {
        "commit waits for the disk": _in_loop(_driver_waits(calls, flush=True)),
        "synchronous_commit off": _in_loop(_driver_waits(calls, flush=False)),
    }


LOAD_WAYS = {  # label: the runners' settings
    "async connection, group commit": {"CONNECTOR": "postgres-loop"},
    "async connection alone": {"CONNECTOR": "postgres-loop-alone"},  # bench/_connectors.py
    "threads, group commit": {"CONNECTOR": "postgres-threads"},
}


def under_load(runs: int, rounds: int) -> list[dict[str, Any]]:
    from bench._db import create_pending_runs, reset_tables
    from bench._procs import RunnerProcess, group_commit_figures, throughput_figures
    from bench._sbs_pg import wait_count
    from workflows.models import Run

    out = []
    for round_ in range(rounds):
        for way, (label, ways) in enumerate(LOAD_WAYS.items()):
            reset_tables()
            progress(f"{label}: {runs} x 10 steps, 2 runner processes (round {round_ + 1})")
            runners = [RunnerProcess("postgres", f"hot-{way}-{i}", settings=ways) for i in range(2)]
            try:
                for r in runners:
                    r.wait_started()
                time.sleep(0.5)  # their LISTEN connections are up
                cpu0 = sum(r.cpu_seconds() for r in runners)
                t0 = time.monotonic()
                create_pending_runs("bench_ten", [[f"load-{i}"] for i in range(runs)])
                wait_count(lambda: Run.objects.filter(status="completed").count(), runs, what="the runs")
                wall = time.monotonic() - t0
                cpu = sum(r.cpu_seconds() for r in runners) - cpu0
            finally:
                for r in runners:
                    r.terminate()
                for r in runners:
                    r.stop()
            figures = throughput_figures(2, runs, wall, cpu)
            figures["group_commit"] = group_commit_figures(runners)
            figures["setting"] = label
            out.append(figures)
    return out


def claims(calls: int, backlogs: tuple[int, ...], limits: tuple[int, ...]) -> dict[str, dict[str, float]]:
    """Median ms of a claim of each size over each due backlog, the three ways alternately."""
    from django.db import connection

    from bench._claim_before import pick_before, send_as_before
    from bench._db import create_pending_runs, reset_tables
    from workflows.storage.django import statements
    from workflows.storage.django.claims import _claim
    from workflows.storage.django.statements import shared

    names = CLAIM_WORKFLOWS

    def one_ordered_scan(now: dt.datetime) -> tuple[str, list[Any]]:  # the pick before
        return pick_before(names, limit, now)

    def per_workflow(now: dt.datetime) -> tuple[str, list[Any]]:
        return statements.claim_due(names, limit, now)

    ways: dict[str, tuple[Any, Any]] = {
        "before: one ordered scan": (one_ordered_scan, send_as_before),
        "per-workflow pick, sent as before": (per_workflow, send_as_before),
        "now: per-workflow pick, generic plan, lazy flush": (per_workflow, _claim),
    }
    out: dict[str, dict[str, float]] = {}
    limit = 0
    for backlog, limit in [(b, n) for b in backlogs for n in limits]:
        reset_tables()
        for i, name in enumerate(names):
            share = backlog // len(names) + (1 if i < backlog % len(names) else 0)
            create_pending_runs(name, [[f"claim-{i}-{j}"] for j in range(share)])
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE workflows_run")
        times: dict[str, list[float]] = {label: [] for label in ways}
        for i in range(calls * len(ways)):
            label = list(ways)[i % len(ways)]
            pick, send = ways[label]
            lease = shared.claim_lease("bench", _now() + dt.timedelta(seconds=600), _now())
            t0 = time.perf_counter()
            rows = send(pick(_now()), lease)
            times[label].append(time.perf_counter() - t0)
            if len(rows) != limit:
                raise RuntimeError(f"a claim over {backlog} due runs took {len(rows)}, not {limit}")
            with connection.cursor() as cursor:  # back in line, at their old place
                cursor.execute(
                    "UPDATE workflows_run SET status = 'pending', wake_at = created_at, lease_owner = ''"
                    " WHERE id = ANY(%s)",
                    [[row[0] for row in rows]],
                )
        out[f"claim of {limit} over {backlog:,} due runs of 3 workflows"] = {
            label: _median_ms(t) for label, t in times.items()
        }
    return out


def report(results: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"Hot path on and off (issue 10), PostgreSQL; date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; "
        f"load average at start {results['load_start']}, at end {results['load_end']}; "
        f"at start {results['speed']}, at end {results['speed_end']}",
        "",
        "| prepared statements, median ms per call | on | off | on / off |",
        "|---|---|---|---|",
    ]
    for name, figure in results["prepared"].items():
        lines.append(
            f"| {name} | {figure['on']:.3f} | {figure['off']:.3f} | {figure['on'] / figure['off']:.2f} |"
        )
    lines += [
        "",
        "lone step commit from the event loop through a runner's store, median: "
        + ", ".join(f"{label} {ms:.3f} ms" for label, ms in results["lone"].items()),
        "",
        "SELECT 1 from the event loop, median: "
        + ", ".join(f"{label} {ms:.3f} ms" for label, ms in results["hops"].items()),
        "",
        "| one committed insert, median ms | " + " | ".join(DRIVER_WAYS) + " |",
        "|---|" + "---|" * len(DRIVER_WAYS),
        *(
            f"| {case} | " + " | ".join(f"{figures[way]:.3f}" for way in DRIVER_WAYS) + " |"
            for case, figures in results["driver"].items()
        ),
        "",
        "| under load | steps/s | runner CPU ms/step | step commits per statement |",
        "|---|---|---|---|",
    ]
    for figures in results["load"]:
        grouped = figures["group_commit"]
        per = f"{grouped['commits'] / grouped['statements']:.1f}" if grouped["statements"] else "1"
        lines.append(
            f"| {figures['setting']} | {figures['steps_per_s']:,.0f} | "
            f"{figures['runner_cpu_ms_per_step']:.3f} | {per} |"
        )
    ways = list(next(iter(results["claims"].values())))
    lines += [
        "",
        "| a claim, median ms | " + " | ".join(ways) + " |",
        "|---|" + "---|" * len(ways),
    ]
    for case, figures in results["claims"].items():
        lines.append(f"| {case} | " + " | ".join(f"{figures[w]:.3f}" for w in ways) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not figures to quote")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    create_database("postgres")
    try:
        os.environ.update(bench_env("postgres"))
        setup_django()
        results: dict[str, Any] = {"load_start": " ".join(f"{x:.2f}" for x in os.getloadavg())}
        results["speed"] = reference_ms_text()
        progress("prepared statements on and off")
        results["prepared"] = prepared(sizes["calls"])
        progress("a lone commit on the async connection, through the group queue, directly")
        results["lone"] = lone_commits(sizes["calls"])
        progress("SELECT 1 through a database thread and on an async connection")
        results["hops"] = hops(sizes["calls"])
        progress("one insert: psycopg blocking, psycopg async, bare libpq from the loop")
        results["driver"] = driver_waits(sizes["calls"])
        progress("claims over due backlogs, three ways")
        results["claims"] = claims(sizes["claims"], sizes["backlogs"], sizes["limits"])
        results["load"] = under_load(sizes["runs"], sizes["rounds"])
        results["load_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        results["speed_end"] = reference_ms_text()
        from django.db import connections

        connections.close_all()
        close_pool = getattr(connections["default"], "close_pool", None)
        if close_pool is not None:
            close_pool()
    finally:
        drop_database("postgres")
    print(report(results, args))


if __name__ == "__main__":
    main()
