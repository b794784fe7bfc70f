"""POST /jobs latency with a runner busy in another process. Prints figures; asserts nothing.

    .venv/bin/python bench/jobs_api.py                     # SQLite: var/bench/jobs_api.sqlite3 (fresh)
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_jobs .venv/bin/python bench/jobs_api.py

On the database DATABASE_URL names (a fresh SQLite file when unset; a PostgreSQL database is
created when missing), it starts the offline demo services and one `runworkflows` process, queues
a backlog of jobs so the runner is busy executing steps (and committing) the whole time, then
times `POST /jobs` requests made through Django's test client in this process: routing, Ninja,
validation and the transaction that stores the run and its start message. No HTTP server is in
the path. The figures are wall-clock milliseconds per request.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--requests", type=int, default=500, help="timed POST /jobs requests (default 500)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed requests first (default 20)")
    parser.add_argument(
        "--backlog", type=int, default=300, help="jobs queued (and timed, as the no-runner reference) first"
    )
    parser.add_argument("--latency-ms", type=float, default=10.0, help="demo services latency (default 10)")
    parser.add_argument("--concurrency", type=int, default=10, help="the runner's --concurrency (default 10)")
    return parser.parse_args()


def prepare_database() -> str:
    url = os.environ.get("DATABASE_URL")
    if not url:
        path = ROOT / "var" / "bench" / "jobs_api.sqlite3"
        path.parent.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        url = os.environ["DATABASE_URL"] = f"sqlite:///{path}"
    elif url.startswith(("postgres://", "postgresql://")):
        import psycopg

        parts = urllib.parse.urlsplit(url)
        name = parts.path.lstrip("/")
        admin = parts._replace(path="/postgres").geturl()
        with psycopg.connect(admin, autocommit=True) as conn:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                conn.execute(f'CREATE DATABASE "{name}"')
    return url


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    args = parse_args()
    url = prepare_database()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from jobs.processes import Child, start_demo_services, wait_until
    from jobs.samples import SAMPLE_PATH
    from workflows.models import Run

    call_command("migrate", interactive=False, verbosity=0)
    logs = ROOT / "var" / "bench"
    env = {**os.environ, "DATABASE_URL": url, "DEMO_LATENCY_MS": str(args.latency_ms)}
    demo, services = start_demo_services(env, logs / "jobs_api-demo.log")
    runner = None
    try:
        env |= services
        client = Client()
        body = {"title": "Bench call", "transcript": SAMPLE_PATH.read_text()}

        def post() -> float:
            started = time.perf_counter()
            response = client.post("/jobs", body, content_type="application/json")
            elapsed = time.perf_counter() - started
            assert response.status_code == 202, response.content
            return elapsed * 1000

        idle = [post() for _ in range(args.backlog)]  # no runner yet: the same request, uncontended
        runner = Child.manage(
            "runner",
            "runworkflows",
            "--concurrency",
            str(args.concurrency),
            env=env,
            log=logs / "jobs_api-runner.log",
        )
        live = ("pending", "running", "waiting")
        wait_until(
            lambda: Run.objects.filter(status="completed").exists(), timeout=60, what="runner", child=runner
        )
        for _ in range(args.warmup):
            post()
        completed_before = Run.objects.filter(status="completed").count()
        window = time.perf_counter()
        timings = [post() for _ in range(args.requests)]
        window = time.perf_counter() - window
        completed = Run.objects.filter(status="completed").count() - completed_before
        still_live = Run.objects.filter(status__in=live).count()
    finally:
        if runner is not None:
            runner.stop()
        demo.stop()

    print(f"POST /jobs on {connection.vendor} ({connection.settings_dict['NAME']}), in-process test client")
    print(f"{'':28}{'median':>9}{'p90':>9}{'p99':>9}{'max':>9}   (ms)")
    for label, values in (("runner busy (the figure)", timings), ("no runner (reference)", idle)):
        figures = [statistics.median(values), percentile(values, 90), percentile(values, 99), max(values)]
        print(f"  {label:<26}" + "".join(f"{f:9.2f}" for f in figures) + f"   n={len(values)}")
    print(
        f"  while timed, the runner (--concurrency {args.concurrency}) finished {completed} jobs in "
        f"{window:.1f} s; {still_live} were still queued or running"
    )


if __name__ == "__main__":
    main()
