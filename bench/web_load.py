"""Open-loop load on `POST /jobs`: ONE web process (daphne, uvicorn or granian) and one runner,
at rising request rates, against a bare Django JSON view served the same way. Prints figures;
asserts nothing.

    .venv/bin/python bench/web_load.py                          # PostgreSQL `bench_web`, daphne
    .venv/bin/python bench/web_load.py --server uvicorn --rates 100 --duration 15
    .venv/bin/python bench/web_load.py --server uvicorn --no-runner --rates 200 --duration 15
    .venv/bin/python bench/web_load.py --db sqlite --rates 20 --duration 2   # a smoke run

First the bare floor: `--server` serving bench/web_asgi.py (Django, no app, no middleware, no
database, one sync JSON view) in a process of its own, loaded at the first rate for
`--floor-duration` seconds: the CPU per request of the server and Django's handler alone. Then,
in a fresh database of its own (PostgreSQL `bench_web` on BENCH_PG_SERVER, created and dropped
here; or `var/bench/web_load.sqlite3`), it starts the offline demo services, ONE `runworkflows`
(none with --no-runner) and ONE `--server` process serving the project, and for each rate sends
`POST /jobs` (the sample transcript, a fresh Idempotency-Key each) on a fixed schedule for
`--duration` seconds, whatever the responses: open loop, so a slow server meets the same
arrivals and its queue shows in the latencies. Latency runs from a request's scheduled send time
to its response (the load generator's own lag counts too; printed as `lag p99`). Errors are
counted by kind: `503` (the JSON answer with Retry-After), `5xx` (other), `html`, `timeout` (no
answer within --timeout), `conn` (connection refused or reset), `4xx`. CPU is read from
/proc/<pid>/stat of the web process (and its children: granian's worker). With --no-runner, one
runner starts after the load and the bench times it draining every job, then counts the jobs
that reached `published`.

The load generator runs on the same machine as the web process, the runner, the demo services and
PostgreSQL, and shares their cores: on a 2-core machine it takes a good part of one.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` and `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import BENCH_VAR, progress
from bench._speed import described
from bench._web_load import RateFigures, send_load, summarize
from bench._web_report import cpu_summary, report, sustainable
from bench._web_servers import SERVERS, cpu_seconds
from bench._web_stack import Runs, Stack, create_database, database_url, drop_database, start_bare
from jobs.processes import Child, wait_until

PG_DATABASE = os.environ.get("BENCH_WEB_PG_DATABASE", "bench_web")
SQLITE_PATH = BENCH_VAR / "web_load.sqlite3"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument(
        "--server", choices=SERVERS, default="daphne", help="the ASGI server (default daphne)"
    )
    parser.add_argument(
        "--rates", default="50,100,200,300,400", help="requests per second, comma-separated, in order"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per rate (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds at the first rate, untimed")
    parser.add_argument(
        "--floor-duration", type=float, default=5.0, help="seconds of the bare floor (0: none)"
    )
    parser.add_argument(
        "--no-runner", action="store_true", help="no runner during the load; then time one draining"
    )
    parser.add_argument("--drain-timeout", type=float, default=900.0, help="seconds the drain may take")
    parser.add_argument("--timeout", type=float, default=10.0, help="client timeout per request, s")
    parser.add_argument("--p99-ms", type=float, default=100.0, help="the sustainable rate's p99 bound")
    parser.add_argument("--target-rate", type=float, default=200.0, help="the issue's target, req/s")
    parser.add_argument("--concurrency", type=int, default=10, help="the runner's --concurrency")
    parser.add_argument("--latency-ms", type=float, default=10.0, help="demo services latency")
    parser.add_argument(
        "--pool",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment for the web process, e.g. --pool DATABASE_POOL_MAX_SIZE=4 (repeatable)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the database and the logs")
    return parser.parse_args(argv)


def measure(
    web: Child, runner: Child | None, runs: Runs | None, base: str, path: str, body: bytes, rate: float,
    args: argparse.Namespace, duration: float,
) -> RateFigures:  # fmt: skip
    """One rate's load and what the web process (and the runner, if any) spent on it."""
    done0 = runs.completed() if runs is not None else 0
    t0 = time.monotonic()
    cpu0 = (cpu_seconds(web.pid), cpu_seconds(runner.pid) if runner is not None else 0.0)
    results, elapsed = send_load(base, path, body, rate, duration, args.timeout)
    wall = time.monotonic() - t0
    cpu1 = (cpu_seconds(web.pid), cpu_seconds(runner.pid) if runner is not None else 0.0)
    figures = summarize(rate, duration, results, elapsed)
    done1 = runs.completed() if runs is not None else 0
    figures.completions_per_s = (done1 - done0) / wall
    figures.web_cpu_pct = 100 * (cpu1[0] - cpu0[0]) / wall
    figures.runner_cpu_pct = 100 * (cpu1[1] - cpu0[1]) / wall
    figures.web_cpu_ms_per_ok = 1000 * (cpu1[0] - cpu0[0]) / figures.ok if figures.ok else float("nan")
    return figures


def measure_floor(args: argparse.Namespace, env: dict[str, str], rate: float) -> RateFigures:
    progress(f"bare floor: {args.server}, {rate:g} req/s for {args.floor_duration:g} s")
    web, base = start_bare(args.server, env, BENCH_VAR / "web_load")
    try:
        send_load(base, "/bare", b"{}", rate, min(1.0, args.floor_duration), args.timeout)  # warm-up
        return measure(web, None, None, base, "/bare", b"{}", rate, args, args.floor_duration)
    finally:
        web.stop()


def drain(stack: Stack, runs: Runs, timeout: float) -> dict[str, Any]:
    """Start one runner and time it finishing every run; then count the published jobs."""
    total = runs.total()
    progress(f"drain: one runner, {total} jobs")
    t0 = time.monotonic()
    runner = stack.start_runner()
    wait_until(lambda: runs.finished() >= total, timeout=timeout, what="the drain", child=runner)
    seconds = time.monotonic() - t0
    return {"runs": total, "seconds": seconds, "runs_per_s": total / seconds, "published": runs.published()}


def run_stack(
    args: argparse.Namespace, env: dict[str, str], rates: list[float], body: bytes
) -> tuple[list[RateFigures], dict[str, Any] | None]:
    progress(
        f"{args.db}: starting the demo services, {'no runner' if args.no_runner else 'the runner'}, {args.server}"
    )
    stack = Stack(args, env, with_runner=not args.no_runner)
    runs = Runs(args.db, env["DATABASE_URL"], SQLITE_PATH)
    figures: list[RateFigures] = []
    drained = None
    try:
        if args.warmup > 0:
            progress(f"warm-up: {rates[0]:g} req/s for {args.warmup:g} s")
            send_load(stack.base, "/jobs", body, rates[0], args.warmup, args.timeout)
        if not args.no_runner:
            stack.wait_runner(runs)
        for rate in rates:
            progress(f"{rate:g} req/s for {args.duration:g} s")
            figures.append(
                measure(stack.web, stack.runner, runs, stack.base, "/jobs", body, rate, args, args.duration)
            )
        if args.no_runner:
            drained = drain(stack, runs, args.drain_timeout)
    finally:
        runs.close()
        stack.stop()
    return figures, drained


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        {
            "DATABASE_URL": database_url(args.db, PG_DATABASE, SQLITE_PATH),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("WORKFLOWS_REGISTRIES", None)  # the project's: the example app's aiJob
    from jobs.samples import SAMPLE_PATH

    body = json.dumps({"title": "Bench call", "transcript": SAMPLE_PATH.read_text()}).encode()
    meta = {
        "db": args.db,
        "server": args.server,
        "cpus": os.cpu_count(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "loadavg": " ".join(Path("/proc/loadavg").read_text().split()[:3]),
        "speed": described(),
        "machine": platform.platform(),
        "pool_env": args.pool,
    }
    floor = measure_floor(args, env, rates[0]) if args.floor_duration > 0 else None
    progress(f"{args.db}: migrating a fresh database")
    create_database(args.db, PG_DATABASE, SQLITE_PATH, env)
    try:
        figures, drained = run_stack(args, env, rates, body)
    finally:
        if not args.keep:
            drop_database(args.db, PG_DATABASE, SQLITE_PATH)
    meta["loadavg_after"] = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    print(report(args, figures, floor, drained, meta))
    print(f"load average after: {meta['loadavg_after']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        best = sustainable(figures, args.p99_ms)
        data = {
            **meta,
            "args": {k: str(v) for k, v in vars(args).items()},
            "rates": [{**asdict(r), "error_rate": r.error_rate} for r in figures],
            "floor": asdict(floor) if floor is not None else None,
            "cpu": cpu_summary(figures, floor),
            "drain": drained,
            "sustainable_rps": best,
            "target_met": best is not None and best >= args.target_rate,
        }
        args.json.write_text(json.dumps(data, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
