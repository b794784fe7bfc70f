"""Scale-out, measured: a backlog of runs drained by 1, 2 and 4 runner "hosts", each a network
namespace of its own with one `manage.py runworkflows --concurrency 20`, talking to a private
PostgreSQL cluster over its veth link, straight (0 ms) or through a proxy that delays each way by
half the round trip (one per host, on its gateway address, forwarding to the cluster on 127.0.0.1).

    sudo .venv/bin/python bench/multihost.py [--runs 1000] [--steps 10] [--hosts 1,2,4]
        [--rtt-ms 0,20] [--concurrency 20] [--quick] [--json PATH]

Per configuration: steps/s, runner CPU per step, database CPU per step (the postmaster and all its
children), the proxies' CPU per step, and steps/s per busy core. Why these: on a machine where
runners, proxies and PostgreSQL share the cores, steps/s says little about a real deployment; the
CPU each side spends per step is what carries over. Needs root; exits 2 when it cannot run.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench`, `tests` and `workflows` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _machine
from bench._common import BENCH_VAR, ROOT, progress, setup_django, wait_until
from bench._hosts import REGISTRY, WORKFLOW, Fleet, why_not

LABELS = (
    "steps/s",
    "runner CPU ms/step",
    "database CPU ms/step",
    "proxy CPU ms/step",
    "cores busy (ours)",
    "steps/s per busy core",
    "machine CPU busy",
)
# Seconds between the bench's counts of completed runs: the drain's end is known to within it. The
# rows' own finished_at will not do: a runner stamps it before the run's completion commit, which at
# 20 ms RTT can land half a second later.
POLL = 0.05


def _ints(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v.strip()]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, help="runs per configuration (default 1000; --quick 100)")
    parser.add_argument("--steps", type=int, default=10, help="trivial steps per run (default 10)")
    parser.add_argument("--hosts", type=_ints, help="runner hosts, e.g. 1,2,4 (--quick: 1,2)")
    parser.add_argument("--rtt-ms", type=_ints, default=[0, 20], help="round trips to the database (0,20)")
    parser.add_argument("--concurrency", type=int, default=20, help="runworkflows --concurrency (20)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100 runs, hosts 1,2")
    parser.add_argument("--json", type=Path, help="also write the figures there")
    args = parser.parse_args(argv)
    args.runs = args.runs or (100 if args.quick else 1000)
    args.hosts = args.hosts or ([1, 2] if args.quick else [1, 2, 4])
    if min(args.hosts) < 1 or args.runs < 1 or args.steps < 1 or min(args.rtt_ms) < 0:
        parser.error("hosts, runs and steps must be positive, round trips not negative")
    return args


# --- the database, from this process (Django pointed at the private cluster) ----------------------


def _sql(sql: str, params: tuple[Any, ...] | None = None) -> list[tuple[Any, ...]]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall() if cursor.description else []


def prepare_django(url: str) -> None:
    """Migrate the cluster's database and set Django up in this process against it (no pool:
    one connection is all the bench needs)."""
    os.environ.pop("REDIS_URL", None)
    os.environ.update(
        {"DATABASE_URL": url, "DATABASE_POOL": "0", "WORKFLOWS_REGISTRIES": REGISTRY,
         "DJANGO_SETTINGS_MODULE": "config.settings"}
    )  # fmt: skip
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, check=True, timeout=300
    )
    setup_django()


def server_settings() -> dict[str, str]:
    names = ("server_version", "fsync", "synchronous_commit", "full_page_writes", "shared_buffers")
    return {name: _sql(f"SHOW {name}")[0][0] for name in names}


def fresh_backlog(runs: int, steps: int, tag: str) -> None:
    """Empty tables, then `runs` pending runs held back (due in a day) while no runner is up;
    planner statistics and a checkpoint, so each configuration starts from the same place."""
    from bench._db import create_pending_runs

    tables = [t for (t,) in _sql("SELECT tablename FROM pg_tables WHERE tablename LIKE %s", ("workflows%",))]
    _sql(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
    create_pending_runs(WORKFLOW, [[f"{tag}-{i}", str(steps)] for i in range(runs)])
    _sql("UPDATE workflows_run SET wake_at = now() + interval '1 day'")
    _sql("ANALYZE")
    _sql("CHECKPOINT")


def release() -> dt.datetime:
    """Make the backlog due and NOTIFY the runners, in one transaction; returns the database's
    clock just before its commit."""
    from django.db import transaction

    from bench._db import notify_runners

    with transaction.atomic():
        _sql("UPDATE workflows_run SET wake_at = now() WHERE status = 'pending'")
        notify_runners()
        [(at,)] = _sql("SELECT clock_timestamp()")
    return at


def drained(runs: int) -> bool:
    [(completed, ended_badly)] = _sql(
        "SELECT count(*) FILTER (WHERE status = 'completed'),"
        " count(*) FILTER (WHERE status IN ('failed', 'cancelled')) FROM workflows_run"
    )
    if ended_badly:
        raise RuntimeError(f"{ended_badly} run(s) failed or were cancelled")
    return completed == runs


# --- one configuration ---------------------------------------------------------------------------


def measure(fleet: Fleet, hosts: int, rtt_ms: int, args: argparse.Namespace) -> dict[str, Any]:
    tag = f"h{hosts}-rtt{rtt_ms}"
    progress(f"{tag}: a fresh backlog of {args.runs} runs x {args.steps} steps, held back")
    fresh_backlog(args.runs, args.steps, tag)
    progress(
        f"{tag}: {hosts} runner host(s) starting" + (f", each behind a {rtt_ms} ms proxy" if rtt_ms else "")
    )
    try:
        fleet.start(hosts, rtt_ms, args.concurrency)
        fleet.wait_ready()
        cpu0, machine0, t0 = fleet.cpu(), _machine.snapshot(None), time.monotonic()
        released = release()
        t_released = time.monotonic()

        def done() -> bool:
            for proc in fleet.runners + fleet.proxies:
                proc.check_alive()
            return drained(args.runs)

        timeout = 60 + args.runs * args.steps / 20
        wait_until(done, timeout=timeout, what=f"{args.runs} runs to complete", interval=POLL)
        t1, machine1, cpu1 = time.monotonic(), _machine.snapshot(None), fleet.cpu()
    finally:
        fleet.end_processes()
    [(first, last)] = _sql("SELECT min(started_at), max(finished_at) FROM workflows_run")
    [(steps,)] = _sql("SELECT count(*) FROM workflows_entry WHERE kind = 'step' AND NOT superseded")
    if steps != args.runs * args.steps:
        raise RuntimeError(f"{steps} step entries, not {args.runs * args.steps}")
    wall = t1 - t_released
    cpu = {k: cpu1[k] - cpu0[k] for k in cpu0}
    cores_busy = sum(cpu.values()) / (t1 - t0)
    figures = {
        "hosts": hosts,
        "rtt_ms": rtt_ms,
        "runs": args.runs,
        "steps": steps,
        "concurrency": args.concurrency,
        "wall_s": wall,
        "steps_per_s": steps / wall,
        "cpu_window_s": t1 - t0,
        "last_finished_at_after_release_s": (last - released).total_seconds(),  # stamped by runners
        "first_start_after_release_ms": (first - released).total_seconds() * 1000 if first else None,
        "cpu_s": cpu,
        "runner_ms_per_step": cpu["runners"] * 1000 / steps,
        "database_ms_per_step": cpu["database"] * 1000 / steps,
        "proxy_ms_per_step": cpu["proxies"] * 1000 / steps if rtt_ms else None,
        "cores_busy": cores_busy,
        "steps_per_s_per_busy_core": steps / wall / cores_busy if cores_busy else None,
        "machine_cpu_busy_pct": _machine.window(machine0, machine1)["cpu_busy_pct"],
    }
    progress(
        f"{tag}: {figures['steps_per_s']:,.0f} steps/s, runner {figures['runner_ms_per_step']:.3f} ms/step,"
        f" database {figures['database_ms_per_step']:.3f} ms/step"
    )
    return figures


# --- output --------------------------------------------------------------------------------------


def _load() -> str:
    return ", ".join(f"{v:.2f}" for v in os.getloadavg())


def _fmt(value: float | None, spec: str) -> str:
    return "–" if value is None else format(value, spec)


def print_table(rows: list[dict[str, Any]]) -> None:
    print(f"| hosts | RTT | {' | '.join(LABELS)} |")
    print("|---|---|" + "---|" * len(LABELS))
    for r in rows:
        cells = (
            _fmt(r["steps_per_s"], ",.0f"),
            _fmt(r["runner_ms_per_step"], ".3f"),
            _fmt(r["database_ms_per_step"], ".3f"),
            _fmt(r["proxy_ms_per_step"], ".3f"),
            _fmt(r["cores_busy"], ".2f"),
            _fmt(r["steps_per_s_per_busy_core"], ",.0f"),
            _fmt(r["machine_cpu_busy_pct"], ".0f") + " %",
        )
        print(f"| {r['hosts']} | {r['rtt_ms']} ms | {' | '.join(cells)} |")


def print_header(args: argparse.Namespace, pg: dict[str, str]) -> None:
    print(f"Many hosts (bench/multihost.py), {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"cores: {os.cpu_count()}; load average at start: {_load()}")
    print(
        f"{args.runs} runs x {args.steps} trivial steps per configuration; hosts {args.hosts}, RTT"
        f" {args.rtt_ms} ms; one `runworkflows --concurrency {args.concurrency}` per host (its own"
        " network namespace, to the database over its veth link)"
    )
    print(
        f"PostgreSQL {pg['server_version']}, a private cluster of the bench: fsync={pg['fsync']},"
        f" synchronous_commit={pg['synchronous_commit']}, full_page_writes={pg['full_page_writes']}"
        f" (PostgreSQL's defaults), shared_buffers={pg['shared_buffers']}"
    )
    print(
        "steps/s: the steps / the time from the commit releasing the backlog (runs created while no"
        " runner was up, held back until every runner listened) to the bench seeing every run"
        f" completed (it counts them every {POLL:g} s)."
        " CPU (utime+stime from /proc/<pid>/stat) over the drain: runners; the database = the"
        " postmaster and all its children; the proxies (one process per host, RTT > 0 only)."
        " cores busy (ours) = their CPU seconds / the drain's seconds; steps/s per busy core ="
        " steps/s / cores busy. machine CPU busy: all of the machine's CPUs (/proc/stat), others' work"
        " included."
    )
    print()


def print_note() -> None:
    print()
    print(
        f"Note: on this {os.cpu_count()}-core machine every runner host, the proxies and PostgreSQL share"
        f" {os.cpu_count()} cores, so the per-step CPU figures (runner ms/step, database ms/step) are what"
        " carries over to bigger machines, not the steps/s."
    )
    print(f"load average at end: {_load()}")


# --- main ----------------------------------------------------------------------------------------


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    reason = why_not()
    if reason:
        print(f"bench/multihost.py {reason}; nothing measured.", file=sys.stderr)
        return 2
    workdir = BENCH_VAR / "multihost"
    workdir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with it ignored
    signal.signal(signal.SIGTERM, _interrupt)  # as Ctrl-C: the finally below removes everything
    started = f"{dt.datetime.now(dt.UTC):%Y-%m-%dT%H:%M:%SZ}"
    load_start = os.getloadavg()
    fleet: Fleet | None = None
    rows: list[dict[str, Any]] = []
    try:
        fleet = Fleet(max(args.hosts), workdir)
        progress(
            f"namespaces {fleet.hosts[0].netns}..h{len(fleet.hosts)} and a private PostgreSQL cluster up"
        )
        assert fleet.cluster is not None
        prepare_django(fleet.cluster.url())
        pg = server_settings()
        print_header(args, pg)
        for rtt_ms in args.rtt_ms:
            for hosts in args.hosts:
                rows.append(measure(fleet, hosts, rtt_ms, args))
    except KeyboardInterrupt:
        print(
            "bench/multihost.py: interrupted; removing its namespaces, processes and cluster", file=sys.stderr
        )
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the clean-up itself is not cut short
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if "django" in sys.modules:
            from django.db import connections

            connections.close_all()
        if fleet is not None:
            fleet.destroy()
        progress("removed the namespaces, processes and the private cluster")
    print_table(rows)
    print_note()
    if args.json:
        figures = {
            "started": started,
            "cores": os.cpu_count(),
            "load_start": load_start,
            "load_end": os.getloadavg(),
            "postgres": pg,
            "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
            "configurations": rows,
        }
        args.json.write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
