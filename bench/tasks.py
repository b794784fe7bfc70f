"""Django tasks, durably: tasks/s through `workflows.tasks.DurableBackend` (runs served by
`runworkflows`) against the django-tasks database backend (`django_tasks_db.DatabaseBackend` and
its `db_worker` command) on the same database, and the latency of `enqueue`. Prints its figures;
never a timed test. About 2 minutes on 2 cores for both databases.

    .venv/bin/python bench/tasks.py                  # SQLite and PostgreSQL
    .venv/bin/python bench/tasks.py --db postgres --tasks 2000 --json var/bench/tasks.json

Per database, in a fresh database (PostgreSQL `bench_tasks`, created and dropped here; SQLite
`var/bench/tasks.sqlite3`), migrated with `django_tasks_db` installed besides the project's apps:
1. enqueue latency: `noop.enqueue(i)` in autocommit (its own transaction each), durable backend
   and database backend, median / p99;
2. throughput: N trivial tasks enqueued in one transaction while 1 (then 2) worker processes wait:
   `runworkflows --concurrency 20` serving `workflows.tasks.registry`, or
   `db_worker --interval 0.05`; tasks/s = N / (first task started -> last task finished), read
   from each backend's own timestamps (so process start-up never counts). Both log each task at
   INFO to a file (the framework's signal loggers; db_worker's verbosity 1).

This file is also the settings shim of its processes: run as a script, it adds `django_tasks_db`
to INSTALLED_APPS and a `"db"` DatabaseBackend to TASKS before Django loads config.settings, so
`db_worker` and `migrate` run as `python bench/tasks.py --manage ...`. The tasks below are
imported by the workers as `bench.tasks.noop`.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` and `config` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _shim_settings() -> None:
    """config.settings plus the database backend of django-tasks (only when run as a script)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import config.settings as project

    if "django_tasks_db" not in project.INSTALLED_APPS:
        project.INSTALLED_APPS = [*project.INSTALLED_APPS, "django_tasks_db"]
    # db_worker keeps its connection between tasks (it calls close_old_connections around each
    # one: with this project's CONN_MAX_AGE = 0 it would reconnect for every task); runworkflows
    # keeps its own connections anyway.
    project.DATABASES["default"]["CONN_MAX_AGE"] = None
    # Django's pool refuses persistent connections; these processes keep one connection anyway.
    project.DATABASES["default"].get("OPTIONS", {}).pop("pool", None)
    project.TASKS = {
        **project.TASKS,
        "db": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": ["default"]},
    }


if __name__ == "__main__":
    _shim_settings()

from workflows.tasks import task  # noqa: E402 - after the shim: @task reads settings.TASKS


@task
def noop(i):
    return i


# --- the parent: databases and the table ------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[1]
PG_DATABASE = os.environ.get("BENCH_TASKS_PG_DATABASE", "bench_tasks")
START_TIMEOUT = 120.0


def _var() -> Path:
    return Path(os.environ.get("BENCH_VAR") or ROOT / "var" / "bench")


def _sqlite_path() -> Path:
    return _var() / "tasks.sqlite3"


def database_url(db: str) -> str:
    if db == "sqlite":
        return f"sqlite:///{_sqlite_path()}"
    server = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
    return f"{server}/{PG_DATABASE}"


def env_of(db: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    env.update(
        {
            "DATABASE_URL": database_url(db),
            "WORKFLOWS_REGISTRIES": "workflows.tasks.registry",
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "INFO",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def _pg_admin(sql: str) -> None:
    import psycopg

    server = os.environ.get("BENCH_PG_SERVER", "postgres://postgres@127.0.0.1:5432")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def drop_database(db: str) -> None:
    if db == "sqlite":
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(_sqlite_path()) + suffix).unlink(missing_ok=True)
    else:
        _pg_admin(f"DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)")


def create_database(db: str) -> None:
    drop_database(db)
    if db == "sqlite":
        _var().mkdir(parents=True, exist_ok=True)
    else:
        _pg_admin(f"CREATE DATABASE {PG_DATABASE}")
    progress(f"{db}: migrating a fresh database (with django_tasks_db)")
    subprocess.run(
        [sys.executable, __file__, "--manage", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=env_of(db),
        check=True,
    )


def progress(message: str) -> None:
    print(f"[bench/tasks {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def table(results: dict[str, dict[str, Any]], n: int) -> str:
    dbs = list(results)
    titles = {"sqlite": "SQLite", "postgres": "PostgreSQL"}

    def pair(s: dict[str, float]) -> str:
        return f"{s['median_ms']:.3f} / {s['p99_ms']:.3f}"

    rows = [
        ("enqueue, durable backend, median / p99 ms", lambda f: pair(f["enqueue"]["durable"])),
        ("enqueue, database backend, median / p99 ms", lambda f: pair(f["enqueue"]["db"])),
    ]
    for k in ("1", "2"):
        rows += [
            (
                f"tasks/s, durable: {k} runworkflows x 20",
                lambda f, k=k: f"{f['throughput']['durable'][k]['tasks_per_s']:,.0f}",
            ),
            (
                f"tasks/s, database backend: {k} db_worker",
                lambda f, k=k: f"{f['throughput']['db'][k]['tasks_per_s']:,.0f}",
            ),
        ]
    rows.append(
        (
            "durable / database tasks/s, 1 / 2 processes",
            lambda f: " / ".join(
                f"{f['throughput']['durable'][k]['tasks_per_s'] / f['throughput']['db'][k]['tasks_per_s']:.2f}x"
                for k in ("1", "2")
            ),
        )
    )
    width = max(len(label) for label, _ in rows)
    lines = [
        f"django.tasks: {n:,} trivial tasks per throughput figure "
        f"({dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores)",
        f"{'figure':<{width}}  " + "  ".join(f"{titles[d]:>18}" for d in dbs),
    ]
    for label, cell in rows:
        lines.append(f"{label:<{width}}  " + "  ".join(f"{cell(results[d]):>18}" for d in dbs))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--tasks", type=int, default=1000, help="tasks per throughput figure (default 1000)")
    parser.add_argument("--latency", type=int, default=300, help="enqueues timed per backend (default 300)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the bench databases afterwards")
    parser.add_argument("--child", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        figures = measure(args.child, tasks=args.tasks, latency=args.latency)
        Path(args.out).write_text(json.dumps(figures, indent=2, default=str))
        return 0
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-tasks-") as tmp:
        for db in ["sqlite", "postgres"] if args.db == "both" else [args.db]:
            create_database(db)
            out = Path(tmp) / f"{db}.json"
            command = [sys.executable, __file__, "--child", db, "--out", str(out)]
            command += ["--tasks", str(args.tasks), "--latency", str(args.latency)]
            try:
                done = subprocess.run(command, cwd=ROOT, env=env_of(db))
            finally:
                if not args.keep:
                    drop_database(db)
            if done.returncode != 0:
                progress(f"{db}: the measuring process failed (exit {done.returncode})")
                return done.returncode
            results[db] = json.loads(out.read_text())
    print(table(results, args.tasks))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    return 0


# --- the measuring child (Django set up on the bench database) -------------------------------------


def measure(db: str, *, tasks: int, latency: int) -> dict[str, Any]:
    import django

    django.setup()
    from bench import tasks as bench_tasks  # the tasks as the workers import them

    figures: dict[str, Any] = {"enqueue": {}, "throughput": {"durable": {}, "db": {}}}
    progress(f"{db}: 1/2 enqueue latency, {latency} enqueues per backend")
    figures["enqueue"]["durable"] = enqueue_latency(bench_tasks.noop, latency)
    figures["enqueue"]["db"] = enqueue_latency(bench_tasks.noop.using(backend="db"), latency)
    for processes in (1, 2):
        progress(f"{db}: 2/2 throughput, {tasks} tasks, {processes} runworkflows process(es)")
        figures["throughput"]["durable"][str(processes)] = durable_throughput(
            db, bench_tasks.noop, tasks, processes
        )
        progress(f"{db}: 2/2 throughput, {tasks} tasks, {processes} db_worker process(es)")
        figures["throughput"]["db"][str(processes)] = db_throughput(db, bench_tasks.noop, tasks, processes)
    reset()
    return figures


def stats_ms(seconds: list[float]) -> dict[str, float]:
    from bench._common import stats_ms as stats

    return stats(seconds)


def enqueue_latency(noop_task: Any, n: int) -> dict[str, float]:
    reset()
    for i in range(20):  # warm: connection, statement caches
        noop_task.enqueue(i)
    timings = []
    for i in range(n):
        t0 = time.perf_counter()
        noop_task.enqueue(i)
        timings.append(time.perf_counter() - t0)
    reset()
    return stats_ms(timings)


def reset() -> None:
    from bench._db import reset_tables

    reset_tables(extra=("django_tasks_database_dbtaskresult",))  # the app label of django_tasks_db


class Worker:
    """A worker process whose log (stderr and stdout) goes to a file."""

    def __init__(self, db: str, name: str, command: list[str], ready_text: str) -> None:
        _var().mkdir(parents=True, exist_ok=True)
        self.log_path = _var() / f"tasks-{db}-{name}.log"
        self._log = open(self.log_path, "w")  # closed in stop()
        self.ready_text = ready_text
        self.proc = subprocess.Popen(command, cwd=ROOT, env=env_of(db), stdout=self._log, stderr=self._log)

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while self.ready_text not in self.log_path.read_text():
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early:\n{self.log_path.read_text()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"worker not ready after {START_TIMEOUT:.0f}s")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def _run_workers(workers: list[Worker], enqueue: Any, done: Any, n: int) -> float:
    """Wait for the idle workers, enqueue `n` tasks in one transaction, wait for all to finish;
    returns the wall time from the commit to the last one seen finished."""
    from django.db import transaction

    try:
        for w in workers:
            w.wait_ready()
        time.sleep(0.5)  # every worker idle and watching
        with transaction.atomic():
            for i in range(n):
                enqueue(i)
        t0 = time.monotonic()
        deadline = t0 + 600
        while done() < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{done()} of {n} tasks finished after 600s")
            time.sleep(0.05)
        return time.monotonic() - t0
    finally:
        for w in workers:
            w.stop()


def durable_throughput(db: str, noop_task: Any, n: int, processes: int) -> dict[str, Any]:
    from django.db.models import Max, Min

    from workflows.models import Entry, Run

    reset()
    runners = [
        Worker(db, f"runner{processes}-{i}", [sys.executable, "manage.py", "runworkflows", "--concurrency", "20"],
               " started (concurrency")
        for i in range(processes)
    ]  # fmt: skip
    finished = Run.objects.filter(workflow="django.task", status="completed")
    wall = _run_workers(runners, noop_task.enqueue, finished.count, n)
    first = Entry.objects.filter(kind="step").aggregate(t=Min("started_at"))["t"]
    last = finished.aggregate(t=Max("finished_at"))["t"]
    span = (last - first).total_seconds()
    return {"processes": processes, "tasks": n, "tasks_per_s": n / span, "span_s": span, "wall_s": wall}


def db_throughput(db: str, noop_task: Any, n: int, processes: int) -> dict[str, Any]:
    from django.db.models import Max, Min
    from django_tasks_db.models import DBTaskResult

    reset()
    command = [sys.executable, __file__, "--manage", "db_worker", "--backend", "db", "--interval", "0.05"]
    command += ["--no-startup-delay", "--no-reload", "--verbosity", "1"]
    workers = [
        Worker(db, f"db_worker{processes}-{i}", [*command, "--worker-id", f"bench-{i}"], "Starting worker")
        for i in range(processes)
    ]
    finished = DBTaskResult.objects.filter(status="SUCCESSFUL")
    db_task = noop_task.using(backend="db")
    wall = _run_workers(workers, db_task.enqueue, finished.count, n)
    times = finished.aggregate(first=Min("started_at"), last=Max("finished_at"))
    span = (times["last"] - times["first"]).total_seconds()
    return {"processes": processes, "tasks": n, "tasks_per_s": n / span, "span_s": span, "wall_s": wall}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--manage":  # a management command with the shim's settings
        from django.core.management import execute_from_command_line

        execute_from_command_line([sys.argv[0], *sys.argv[2:]])
    else:
        sys.exit(main())
