"""Open-loop load on `POST /jobs`: one daphne process and one runner, at rising request rates.
Prints figures; asserts nothing.

    .venv/bin/python bench/web_load.py                          # PostgreSQL `bench_web`, ~1.5 min
    .venv/bin/python bench/web_load.py --rates 100,200 --duration 20 --json var/bench/web_load.json
    .venv/bin/python bench/web_load.py --db sqlite --rates 20 --duration 2   # a smoke run

In a fresh database of its own (PostgreSQL `bench_web` on BENCH_PG_SERVER, created and dropped
here; or `var/bench/web_load.sqlite3`), it starts the offline demo services, ONE `runworkflows`
and ONE daphne serving the project (its connection pool as the DATABASE_POOL_* variables say),
then for each rate sends `POST /jobs` (the sample transcript, a fresh Idempotency-Key each) on a
fixed schedule for `--duration` seconds, whatever the responses: open loop, so a slow server
meets the same arrivals and its queue shows in the latencies. Latency runs from a request's
scheduled send time to its response (so the load generator's own lag counts too; it is printed
as `lag p99`). Errors are counted by kind: `503` (the JSON answer with Retry-After), `5xx`
(other), `html` (any HTML answer, e.g. Django's error page), `timeout` (no answer within
--timeout), `conn` (connection refused or reset), `4xx`. The runner's completions per second
are the jobs it finished during the rate's window (the backlog of earlier rates included).

The sustainable rate is the highest rate with p99 <= --p99-ms and no error. The load generator
runs on the same machine as daphne, the runner, the demo services and PostgreSQL, and shares
their cores: on a 2-core machine it takes a good part of one.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` and `jobs` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench._common import BENCH_VAR, PG_SERVER_URL, ROOT, progress
from jobs.processes import Child, answers, start_demo_services, wait_until

PG_DATABASE = os.environ.get("BENCH_WEB_PG_DATABASE", "bench_web")
SQLITE_PATH = BENCH_VAR / "web_load.sqlite3"
TICKS = os.sysconf("SC_CLK_TCK")
KINDS = ("503", "5xx", "html", "timeout", "conn", "4xx")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=("postgres", "sqlite"), default="postgres")
    parser.add_argument(
        "--rates", default="50,100,200,300,400", help="requests per second, comma-separated, in order"
    )
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per rate (default 10)")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds at the first rate, untimed")
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
        help="extra environment for daphne, e.g. --pool DATABASE_POOL_MAX_SIZE=4 (repeatable)",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the database and the logs")
    return parser.parse_args(argv)


# --- the database ------------------------------------------------------------------------------


def database_url(db: str) -> str:
    return f"sqlite:///{SQLITE_PATH}" if db == "sqlite" else f"{PG_SERVER_URL}/{PG_DATABASE}"


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def create_database(db: str, env: dict[str, str]) -> None:
    drop_database(db)
    if db == "postgres":
        _pg_admin(f'CREATE DATABASE "{PG_DATABASE}"')
    progress(f"{db}: migrating a fresh database")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True
    )


def drop_database(db: str) -> None:
    if db == "postgres":
        _pg_admin(f'DROP DATABASE IF EXISTS "{PG_DATABASE}" WITH (FORCE)')
    else:
        BENCH_VAR.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{SQLITE_PATH}{suffix}").unlink(missing_ok=True)


class Completed:
    """Counts the runs the runner completed, on a connection of this process's own."""

    def __init__(self, db: str) -> None:
        if db == "postgres":
            import psycopg

            self._conn: Any = psycopg.connect(database_url(db), autocommit=True)
        else:
            self._conn = sqlite3.connect(SQLITE_PATH, timeout=30)

    def count(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM workflows_run WHERE status = 'completed'").fetchone()
        return int(row[0])

    def close(self) -> None:
        self._conn.close()


# --- processes ---------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


class Stack:
    """The demo services, one runner and one daphne, on the bench database."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str]) -> None:
        self.logs = BENCH_VAR / "web_load"
        self.children: list[Child] = []
        try:
            self._start_all(args, env)
        except BaseException:
            self.stop()  # no process outlives a failed start
            raise

    def _start_all(self, args: argparse.Namespace, env: dict[str, str]) -> None:
        demo_env = {**env, "DEMO_LATENCY_MS": str(args.latency_ms)}
        demo, services = start_demo_services(demo_env, self.logs / "demo.log")
        self._start(demo)
        env = {**env, **services}
        self.runner = self._start(
            Child.manage(
                "runner",
                "runworkflows",
                "--concurrency",
                str(args.concurrency),
                env=env,
                log=self.logs / "runner.log",
            )
        )
        port = _free_port()
        web_env = {**env, **dict(item.split("=", 1) for item in args.pool)}
        self.daphne = self._start(
            Child(
                "daphne",
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-b",
                    "127.0.0.1",
                    "-p",
                    str(port),
                    "config.asgi:application",
                ],
                env=web_env,
                log=self.logs / "daphne.log",
            )
        )
        self.base = f"http://127.0.0.1:{port}"
        wait_until(answers(f"{self.base}/api/openapi.json"), timeout=120, what="daphne", child=self.daphne)

    def wait_runner(self, completed: Completed) -> None:
        """The runner is up once it has completed a job (the warm-up's, or one sent here)."""
        if completed.count() == 0:
            httpx.post(f"{self.base}/jobs", json={"title": "probe", "transcript": "probe"}, timeout=30)
        wait_until(
            lambda: completed.count() > 0, timeout=300, what="the runner's first job", child=self.runner
        )

    def _start(self, child: Child) -> Child:
        self.children.append(child)
        return child

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- the load ----------------------------------------------------------------------------------


@dataclass
class RateFigures:
    rate: float
    duration_s: float
    sent: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    p50_ms: float = math.nan
    p90_ms: float = math.nan
    p99_ms: float = math.nan
    max_ms: float = math.nan
    lag_p99_ms: float = math.nan
    achieved_rps: float = 0.0
    completions_per_s: float = 0.0
    daphne_cpu_pct: float = 0.0
    runner_cpu_pct: float = 0.0

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def error_rate(self) -> float:
        return self.error_count / self.sent if self.sent else 0.0


def _kind(response: httpx.Response) -> str | None:
    """None for a success; else the error's kind."""
    html = response.headers.get("content-type", "").startswith("text/html")
    if response.status_code < 300 and not html:
        return None
    if html:
        return "html"
    if response.status_code == 503 and response.headers.get("Retry-After"):
        return "503"
    if response.status_code >= 500:
        return "5xx"
    return "4xx"


def _percentile(ordered: list[float], p: float) -> float:
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


async def load(
    http: httpx.AsyncClient, body: bytes, rate: float, duration: float, timeout: float
) -> tuple[list[tuple[float, float, str | None]], float]:
    """Send `rate` requests a second for `duration` seconds on schedule; return, per request,
    (latency from its scheduled time, lag of its actual send, error kind or None), and the
    seconds from the first scheduled send to the last answer."""
    loop = asyncio.get_running_loop()
    results: list[tuple[float, float, str | None]] = []
    total = round(rate * duration)
    start = loop.time() + 0.05

    async def one(scheduled: float) -> None:
        lag = loop.time() - scheduled
        kind: str | None
        try:
            # One deadline for the whole request (httpx's timeout is per phase: connect, read...).
            response = await asyncio.wait_for(
                http.post(
                    "/jobs",
                    content=body,
                    headers={"Content-Type": "application/json", "Idempotency-Key": uuid.uuid4().hex},
                ),
                timeout=max(0.001, scheduled + timeout - loop.time()),
            )
            kind = _kind(response)
        except (httpx.TimeoutException, TimeoutError):
            kind = "timeout"
        except httpx.TransportError:
            kind = "conn"
        results.append((loop.time() - scheduled, lag, kind))

    tasks = []
    for i in range(total):
        scheduled = start + i / rate
        delay = scheduled - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(scheduled)))
    await asyncio.gather(*tasks)
    return results, loop.time() - start


def measure_rate(
    stack: Stack, completed: Completed, body: bytes, rate: float, args: argparse.Namespace
) -> RateFigures:
    done0, t0 = completed.count(), time.monotonic()
    cpu0 = (cpu_seconds(stack.daphne.pid), cpu_seconds(stack.runner.pid))
    results, elapsed = asyncio.run(_with_client(stack.base, body, rate, args.duration, args.timeout))
    wall = time.monotonic() - t0
    cpu1 = (cpu_seconds(stack.daphne.pid), cpu_seconds(stack.runner.pid))
    done1 = completed.count()
    figures = RateFigures(rate=rate, duration_s=args.duration, sent=len(results))
    for _latency, _lag, kind in results:
        if kind is None:
            figures.ok += 1
        else:
            figures.errors[kind] += 1
    every = sorted(latency * 1000 for latency, _lag, _kind in results)  # errors count too
    figures.p50_ms = statistics.median(every) if every else math.nan
    figures.p90_ms = _percentile(every, 90)
    figures.p99_ms = _percentile(every, 99)
    figures.max_ms = every[-1] if every else math.nan
    figures.lag_p99_ms = _percentile(sorted(lag * 1000 for _l, lag, _k in results), 99)
    figures.achieved_rps = figures.ok / elapsed if elapsed else 0.0
    figures.completions_per_s = (done1 - done0) / wall
    figures.daphne_cpu_pct = 100 * (cpu1[0] - cpu0[0]) / wall
    figures.runner_cpu_pct = 100 * (cpu1[1] - cpu0[1]) / wall
    return figures


async def _with_client(
    base: str, body: bytes, rate: float, duration: float, timeout: float
) -> tuple[list[tuple[float, float, str | None]], float]:
    # Enough connections that the client never queues a request behind another (open loop).
    limits = httpx.Limits(max_connections=4000, max_keepalive_connections=4000)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=timeout) as http:
        return await load(http, body, rate, duration, timeout)


# --- the report --------------------------------------------------------------------------------


def sustainable(rates: list[RateFigures], p99_ms: float) -> float | None:
    """The highest rate with p99 within the bound and no error at all."""
    good = [r.rate for r in rates if r.error_count == 0 and r.p99_ms <= p99_ms]
    return max(good) if good else None


def report(args: argparse.Namespace, rates: list[RateFigures], meta: dict[str, Any]) -> str:
    lines = [
        f"POST /jobs, open loop, 1 daphne + 1 runner (--concurrency {args.concurrency}) on {meta['db']}, "
        f"{meta['cpus']} CPUs shared with the load generator, demo services and the database; {meta['date']}",
        f"{'rate':>6} {'sent':>6} {'ok/s':>7} {'p50':>8} {'p90':>8} {'p99':>8} {'max':>8} {'lag99':>7} "
        f"{'err%':>6}  {'503':>5} {'5xx':>4} {'html':>4} {'tmo':>4} {'conn':>4} {'4xx':>4} "
        f"{'runs/s':>7} {'web%':>5} {'run%':>5}",
    ]
    for r in rates:
        e = r.errors
        lines.append(
            f"{r.rate:6.0f} {r.sent:6d} {r.achieved_rps:7.1f} {r.p50_ms:8.1f} {r.p90_ms:8.1f} {r.p99_ms:8.1f} "
            f"{r.max_ms:8.1f} {r.lag_p99_ms:7.1f} {100 * r.error_rate:6.2f}  {e['503']:5d} {e['5xx']:4d} "
            f"{e['html']:4d} {e['timeout']:4d} {e['conn']:4d} {e['4xx']:4d} {r.completions_per_s:7.1f} "
            f"{r.daphne_cpu_pct:5.0f} {r.runner_cpu_pct:5.0f}"
        )
    lines.append("(latencies in ms from each request's scheduled send, errors included; runs/s: jobs the")
    lines.append(" runner completed per second in the window; web% / run%: CPU of daphne / the runner)")
    best = sustainable(rates, args.p99_ms)
    lines.append(
        f"sustainable rate (p99 <= {args.p99_ms:g} ms, 0 errors): "
        + (f"{best:g} req/s" if best is not None else "none of the rates tried")
    )
    met = best is not None and best >= args.target_rate
    lines.append(
        f"target: >= {args.target_rate:g} req/s with p99 <= {args.p99_ms:g} ms and 0 errors: "
        + ("MET" if met else "NOT MET")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    rates = [float(r) for r in args.rates.split(",") if r.strip()]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        {
            "DATABASE_URL": database_url(args.db),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.pop("WORKFLOWS_REGISTRIES", None)  # the project's: the example app's aiJob
    create_database(args.db, env)
    from jobs.samples import SAMPLE_PATH

    body = json.dumps({"title": "Bench call", "transcript": SAMPLE_PATH.read_text()}).encode()
    meta = {
        "db": args.db,
        "cpus": os.cpu_count(),
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": platform.platform(),
        "pool_env": args.pool,
    }
    progress(f"{args.db}: starting the demo services, the runner and daphne")
    stack = Stack(args, env)
    completed = Completed(args.db)
    figures: list[RateFigures] = []
    try:
        if args.warmup > 0:
            progress(f"warm-up: {rates[0]:g} req/s for {args.warmup:g} s")
            asyncio.run(_with_client(stack.base, body, rates[0], args.warmup, args.timeout))
        stack.wait_runner(completed)
        for rate in rates:
            progress(f"{rate:g} req/s for {args.duration:g} s")
            figures.append(measure_rate(stack, completed, body, rate, args))
    finally:
        completed.close()
        stack.stop()
        if not args.keep:
            drop_database(args.db)
    print(report(args, figures, meta))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        best = sustainable(figures, args.p99_ms)
        data = {
            **meta,
            "args": {k: str(v) for k, v in vars(args).items()},
            "rates": [{**asdict(r), "error_rate": r.error_rate} for r in figures],
            "sustainable_rps": best,
            "target_met": best is not None and best >= args.target_rate,
        }
        args.json.write_text(json.dumps(data, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
