"""The project side of `bench/side_by_side.py`, measured in a child process with Django set up on
the bench's own PostgreSQL database (DATABASE_URL, BENCH_PG_DATABASE).

    python bench/_sbs_project.py --sizes JSON --out PATH
    python bench/_sbs_project.py --sizes JSON --out PATH --in-process-only   # any DATABASE_URL

It reuses the engine benchmark's pieces: the in-process Runner over the real DjangoStore as
`runworkflows` builds it (`bench/_inprocess.py`), `runworkflows --concurrency 20` processes
(`bench/_procs.RunnerProcess`), the bulk insert of pending runs (`bench/_db.py`) and the
send -> first step measurement (`bench/_procs.send_latency`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _machine
from bench._common import database_url, progress, setup_django, stats_ms

DB = "postgres"
STATEMENTS: Counter[str] = Counter()
COUNTING = False


def _counting(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    if COUNTING:
        STATEMENTS["all"] += 1
    return execute(sql, params, many, context)


def install_counter() -> None:
    """Count every statement sent through a Django connection (the store's database threads
    included: each new connection gets the wrapper); `_runs` adds the commits the store sent on
    its async connection. BEGIN/COMMIT are not statements here."""
    from django.db.backends.signals import connection_created

    def on_created(sender: Any, connection: Any, **kwargs: Any) -> None:
        if _counting not in connection.execute_wrappers:
            connection.execute_wrappers.append(_counting)

    connection_created.connect(on_created, weak=False)


# How a run is started and executed in the measuring process:
# - "here": `runner.start(workflow, key)` creates it leased to the runner, which executes it at
#   once (no claim), as DBOS's `start_workflow` runs a workflow in the process that starts it;
#   `runner.executed(run_id)` waits for that execution (a run the store did not create leased
#   here would be claimed by `runner.run_due()` first);
# - "claim": `client.aget_or_create(key)` creates it runnable, then `runner.run_due()` claims and
#   executes it (and claims once more, finding nothing), as a run started elsewhere is run.
# Either way the record is then read back completed (`handle.ainfo()`).
WAYS = ("here", "claim")


async def _runs(plan: list[tuple[str, str, str]]) -> list[tuple[str, str, float, float]]:
    """Each (workflow, key, way) in turn. Returns (workflow, way, start -> result read, start ->
    completion commit) seconds."""
    from bench import _inprocess
    from workflows import conf
    from workflows.storage.django.async_commits import AsyncCommits

    store = _inprocess._make_store()
    runner = _inprocess._runner(store)
    registry = conf.registry()
    clients = {}
    out = []
    try:
        for workflow, key, way in plan:
            if workflow not in clients:
                clients[workflow] = registry.client(workflow, store=store)
            t0 = time.perf_counter()
            if way == "here":
                handle = await runner.start(workflow, [key])
                if handle.snapshot.status == "pending":  # not taken here: claimed
                    await runner.run_due()
                await runner.executed(handle.run_id)
            else:
                handle = await clients[workflow].aget_or_create([key])
                await runner.run_due()
            info = await handle.ainfo()
            t1 = time.perf_counter()
            if info.status != "completed":
                raise RuntimeError(f"{workflow} ended {info.status}")
            out.append((workflow, way, t1 - t0, store.completed[handle.run_id] - t0))
    finally:
        group, reads = getattr(store.connector, "group", None), getattr(store.connector, "reads", None)
        if COUNTING and isinstance(group, AsyncCommits):  # sent on its own connection,
            STATEMENTS["all"] += group.statements  # which Django's wrappers never see
        if COUNTING and reads is not None:  # claims, starts and reads: the same
            STATEMENTS["all"] += reads.statements
        store.close()
    return out


def in_process(n: int, warmup: int = 3) -> dict[str, Any]:
    """0-step and 10-step runs alternately, in this process, each way in turn ("zero", "ten":
    started here; "zero_claim", "ten_claim": through a client and a claim)."""
    from bench import _inprocess
    from bench._db import reset_tables

    reset_tables()
    plan = []
    for i in range(n + warmup):
        for way in WAYS:
            plan += [("sbs_zero", f"z-{way}-{i}", way), ("bench_ten", f"t-{way}-{i}", way)]
    done = _inprocess._in_loop(_runs(plan))[2 * len(WAYS) * warmup :]
    out: dict[str, Any] = {}
    for way in WAYS:
        for label, workflow in (("zero", "sbs_zero"), ("ten", "bench_ten")):
            mine = [d for d in done if d[0] == workflow and d[1] == way]
            out[label if way == "here" else f"{label}_{way}"] = {
                "to_result": stats_ms([d[2] for d in mine]),
                "to_completion_commit": stats_ms([d[3] for d in mine]),
            }
    return out


def _close_connections() -> None:
    """Close this process's connections for real: with Django's pool, `close_all()` only returns
    them to the pool, whose backends would publish their counters up to 10 s later."""
    from django.db import connections

    connections.close_all()
    close_pool = getattr(connections["default"], "close_pool", None)
    if close_pool is not None:
        close_pool()


def stats_windows(n: int) -> dict[str, Any]:
    """Statements, transactions, WAL and tuple writes of n 0-step runs and of n 10-step runs,
    started here as in `in_process`; all connections are closed around each batch (see _sbs_pg)."""
    global COUNTING
    from bench import _inprocess, _sbs_pg
    from bench._db import reset_tables

    url = database_url(DB)
    reset_tables()
    _close_connections()
    out: dict[str, Any] = {"n": n}
    before = _sbs_pg.settled_snapshot(url)
    for label, workflow in (("empty", None), ("zero", "sbs_zero"), ("ten", "bench_ten")):
        STATEMENTS.clear()
        COUNTING = True
        plan = [(workflow, f"{label}-{i}", "here") for i in range(n)] if workflow else []
        _inprocess._in_loop(_runs(plan))
        COUNTING = False
        _close_connections()
        after = _sbs_pg.settled_snapshot(url)
        window = _sbs_pg.window(url, before, after)
        window["statements"] = STATEMENTS["all"]
        out[label] = window
        before = after
    return out


def _completed(prefix: str) -> int:
    from workflows.models import Run

    return Run.objects.filter(status="completed", key_text__startswith=prefix).count()


def _drain(runners: list[Any], runs: int, prefix: str, postmaster: int | None) -> dict[str, Any]:
    """`runs` 10-step runs keyed `prefix-i`, inserted pending at once and drained by `runners`:
    steps/s from the entries' own timestamps, the runners' and PostgreSQL's CPU per step. Run
    twice on the same processes: the second drain finds them warm (a runner's first seconds pay
    for what it then keeps: each new statement text is planned anew at its first five executions,
    its connections and caches are new), as DBOS's side does (`_sbs_dbos._drain`)."""
    from bench import _sbs_pg
    from bench._db import create_pending_runs
    from bench._procs import throughput_figures

    cpu0, pg0 = sum(r.cpu_seconds() for r in runners), _machine.postgres_cpu_seconds(postmaster)
    t0 = time.monotonic()
    create_pending_runs("bench_ten", [[f"{prefix}-{i}"] for i in range(runs)])
    key = f'["{prefix}-'
    _sbs_pg.wait_count(lambda: _completed(key), runs, what=f"{runs} runs {prefix}-* to complete")
    wall, cpu = time.monotonic() - t0, sum(r.cpu_seconds() for r in runners) - cpu0
    tp = throughput_figures(2, runs, wall, cpu, key_prefix=key)
    pg = _machine.postgres_cpu_seconds(postmaster)
    tp["postgres_cpu_ms_per_step"] = _machine.cpu_ms_per_step(pg0, pg, tp["steps"])
    progress(f"project: {tp['steps']} steps in {tp['span_s']:.1f}s: {tp['steps_per_s']:,.0f} steps/s")
    return tp


def throughput_and_busy(sizes: dict[str, Any]) -> dict[str, Any]:
    """N runs x 10 steps inserted pending in one transaction while 2 `runworkflows --concurrency
    20` processes wait, and N more once they drained those (`_drain`); then, with the same
    processes busy on a backlog, `client.get_or_create(key)` timed alone."""

    from bench import _sbs_pg
    from bench._db import create_pending_runs, reset_tables
    from bench._procs import RunnerProcess, group_commit_figures
    from workflows import conf

    runs, backlog, submits = sizes["throughput"], sizes["backlog"], sizes["submits"]
    reset_tables()
    runners = [RunnerProcess(DB, f"sbs-tp{i}") for i in range(2)]
    try:
        for r in runners:
            r.wait_started()
        time.sleep(0.5)  # the LISTEN connections are up
        postmaster = _machine.postmaster_pid(database_url(DB))
        tp = _drain(runners, runs, "tp", postmaster)
        tp["warm"] = _drain(runners, runs, "tw", postmaster)

        create_pending_runs("bench_ten", [[f"bl-{i}"] for i in range(backlog)])
        _sbs_pg.wait_count(lambda: _completed('["bl-'), 1, what="the backlog to start", interval=0.005)
        client = conf.registry().client("bench_ten")
        busy = _sbs_pg.submits_beside_floor(
            database_url(DB), submits, lambda i: client.get_or_create([f"sub-{i}"])
        )
        left = backlog - _completed('["bl-')
        _sbs_pg.wait_count(lambda: _completed('["bl-'), backlog, what="the backlog to drain")
        paced = submits_paced(sizes["paced_steps_per_s"], submits, client)
    finally:
        for r in runners:
            r.terminate()
        for r in runners:
            r.stop()
    tp["group_commit"] = group_commit_figures(runners)  # over all phases: the runners' whole life
    busy["backlog"] = backlog
    busy["backlog_left_after_last_submit"] = left
    return {"throughput": tp, "submit_busy": busy, "submit_paced": paced}


def submits_paced(steps_per_s: float, submits: int, client: Any) -> dict[str, Any]:
    """The submit figure again, the same runner processes now kept busy at `steps_per_s` (DBOS's
    drained rate in the same round) by 10-step runs started at a steady pace from a process of
    its own (`bench/_pacer.py`), rather than flat out on a backlog: what a submit costs beside
    workers doing as much work per second as DBOS's do. Returns the submits' stats_ms, the floor
    inserts' under "floor", and the steps/s the runners completed meanwhile."""
    import subprocess

    from bench import _sbs_pg
    from bench._common import ROOT, bench_env
    from workflows.models import Entry

    env = bench_env(DB)
    env["WORKFLOWS_REGISTRIES"] = os.environ.get("WORKFLOWS_REGISTRIES", env["WORKFLOWS_REGISTRIES"])
    pacer = subprocess.Popen(
        [sys.executable, "bench/_pacer.py", "--workflow", "bench_ten", "--prefix", "pace-",
         "--per-second", str(steps_per_s / 10)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert pacer.stdout is not None and pacer.stdout.readline().strip() == "started"
        _sbs_pg.wait_count(lambda: _completed('["pace-'), 10, what="the paced runs to complete")
        steps = Entry.objects.filter(run__key_text__startswith='["pace-', status="completed", kind="step")
        t0, before = time.monotonic(), steps.count()
        out = _sbs_pg.submits_beside_floor(
            database_url(DB), submits, lambda i: client.get_or_create([f"subp-{i}"])
        )
        out["steps_per_s"] = (steps.count() - before) / (time.monotonic() - t0)
    finally:
        pacer.terminate()
        pacer.wait(timeout=30)
    out["target_steps_per_s"] = steps_per_s
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument(
        "--in-process-only",
        action="store_true",
        help="the in-process figures alone, on DATABASE_URL's database",
    )
    parser.add_argument(
        "--thread-commits",
        action="store_true",
        help='every commit through the database threads (WORKFLOWS["CONNECTOR"] "threads" on SQLite, '
        '"postgres-threads" on PostgreSQL)',
    )
    args = parser.parse_args()
    sizes = json.loads(args.sizes)
    setup_django()
    if args.thread_commits:
        from django.conf import settings
        from django.db import connection

        through_threads = "threads" if connection.vendor == "sqlite" else "postgres-threads"
        settings.WORKFLOWS = {**settings.WORKFLOWS, "CONNECTOR": through_threads}
    if args.in_process_only:  # bench/side_by_side_sqlite.py
        progress(f"project: in-process 0-step and 10-step runs ({sizes['ten']} each)")
        Path(args.out).write_text(json.dumps(in_process(sizes["ten"]), indent=2, default=str))
        return
    install_counter()
    from bench import _procs
    from bench._db import reset_tables

    figures: dict[str, Any] = {}
    progress(f"project: in-process 0-step and 10-step runs ({sizes['ten']} each)")
    figures.update(in_process(sizes["ten"]))
    progress(f"project: statements, WAL and tuple writes ({sizes['stats']} runs of each)")
    figures["pg"] = stats_windows(sizes["stats"])
    progress(
        f"project: throughput, {sizes['throughput']} x 10 steps, 2 runner processes; then submits "
        f"with a backlog of {sizes['backlog']}"
    )
    figures.update(throughput_and_busy(sizes))
    progress(f"project: send -> first step ({sizes['send']} sends)")
    figures["send"] = _procs.send_latency(DB, sizes["send"])
    reset_tables()
    Path(args.out).write_text(json.dumps(figures, indent=2, default=str))


if __name__ == "__main__":
    main()
