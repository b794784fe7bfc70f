"""The processes and the database of bench/web_load.py: a fresh database, the demo services,
ONE web server process (daphne, uvicorn or granian) serving the project, a runner (at once, or
only after the load with --no-runner), and the bare floor's server."""

from __future__ import annotations

import argparse
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2

from bench._common import BENCH_VAR, PG_SERVER_URL, ROOT
from bench._web_servers import free_port, server_argv
from jobs.processes import Child, answers, start_demo_services, wait_until


def database_url(db: str, pg_database: str, sqlite_path: Path) -> str:
    return f"sqlite:///{sqlite_path}" if db == "sqlite" else f"{PG_SERVER_URL}/{pg_database}"


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def create_database(db: str, pg_database: str, sqlite_path: Path, env: dict[str, str]) -> None:
    drop_database(db, pg_database, sqlite_path)
    if db == "postgres":
        _pg_admin(f'CREATE DATABASE "{pg_database}"')
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"], cwd=ROOT, env=env, check=True
    )


def drop_database(db: str, pg_database: str, sqlite_path: Path) -> None:
    if db == "postgres":
        _pg_admin(f'DROP DATABASE IF EXISTS "{pg_database}" WITH (FORCE)')
    else:
        BENCH_VAR.mkdir(parents=True, exist_ok=True)
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{sqlite_path}{suffix}").unlink(missing_ok=True)


class Runs:
    """Counts the bench database's runs, on a connection of this process's own."""

    def __init__(self, db: str, url: str, sqlite_path: Path) -> None:
        self.db = db
        if db == "postgres":
            import psycopg

            self._conn: Any = psycopg.connect(url, autocommit=True)
        else:
            self._conn = sqlite3.connect(sqlite_path, timeout=30)

    def _count(self, where: str) -> int:
        row = self._conn.execute(f"SELECT count(*) FROM workflows_run WHERE {where}").fetchone()
        return int(row[0])

    def completed(self) -> int:
        return self._count("status = 'completed'")

    def total(self) -> int:
        return self._count("TRUE" if self.db == "postgres" else "1")

    def finished(self) -> int:
        return self._count("status IN ('completed', 'failed', 'cancelled')")

    def published(self) -> int:
        stage = "state->>'stage'" if self.db == "postgres" else "json_extract(state, '$.stage')"
        return self._count(f"status = 'completed' AND {stage} = 'published'")

    def close(self) -> None:
        self._conn.close()


class Stack:
    """The demo services, one web server process and (unless `with_runner` is false) one runner."""

    def __init__(self, args: argparse.Namespace, env: dict[str, str], *, with_runner: bool) -> None:
        self.logs = BENCH_VAR / "web_load"
        self.args = args
        self.children: list[Child] = []
        self.runner: Child | None = None
        try:
            demo, services = start_demo_services(
                {**env, "DEMO_LATENCY_MS": str(args.latency_ms)}, self.logs / "demo.log"
            )
            self._start(demo)
            self.env = {**env, **services}
            if with_runner:
                self.start_runner()
            web_env = {**self.env, **dict(item.split("=", 1) for item in args.pool)}
            self.web, self.base = start_server(args.server, "config.asgi:application", web_env, self.logs)
            self._start(self.web)
            wait_until(answers(f"{self.base}/api/openapi.json"), timeout=120, what="web", child=self.web)
        except BaseException:
            self.stop()  # no process outlives a failed start
            raise

    def start_runner(self) -> Child:
        self.runner = self._start(
            Child.manage(
                "runner",
                *("runworkflows", "--concurrency", str(self.args.concurrency)),
                env=self.env,
                log=self.logs / "runner.log",
            )
        )
        return self.runner

    def wait_runner(self, runs: Runs) -> None:
        """The runner is up once it has completed a job (the warm-up's, or one sent here)."""
        if runs.completed() == 0:
            httpx2.post(f"{self.base}/jobs", json={"title": "probe", "transcript": "probe"}, timeout=30)
        wait_until(
            lambda: runs.completed() > 0, timeout=300, what="the runner's first job", child=self.runner
        )

    def _start(self, child: Child) -> Child:
        self.children.append(child)
        return child

    def stop(self) -> None:
        for child in reversed(self.children):
            child.stop()


def start_server(server: str, app: str, env: dict[str, str], logs: Path) -> tuple[Child, str]:
    """`server` serving `app` on a free port of 127.0.0.1: the child and its base URL."""
    port = free_port()
    name = f"{server}-{app.split(':')[0].replace('.', '_')}"
    child = Child(name, server_argv(server, app, port), env=env, log=logs / f"{name}.log")
    return child, f"http://127.0.0.1:{port}"


def start_bare(server: str, env: dict[str, str], logs: Path) -> tuple[Child, str]:
    """The bare floor (bench/web_settings.py) served by `server`, answering."""
    bare_env = {**env, "DJANGO_SETTINGS_MODULE": "bench.web_settings"}
    child, base = start_server(server, "bench.web_asgi:application", bare_env, logs)
    try:
        ready = lambda: _posts(f"{base}/bare")  # noqa: E731
        wait_until(ready, timeout=60, what="the bare floor", child=child)
    except BaseException:
        child.stop()
        raise
    return child, base


def _posts(url: str) -> bool:
    try:
        return httpx2.post(url, content=b"{}", timeout=2.0).status_code == 202
    except httpx2.HTTPError:
        return False
