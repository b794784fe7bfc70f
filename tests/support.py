"""Helpers shared by tests: for those that start real processes (runners, daphne, the quickstart),
and a step's commit as the engine writes it, for the store tests."""

from __future__ import annotations

import datetime as dt
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx2
from django.db import connection

from jobs.processes import database_url
from workflows.core.new_run import NewRun
from workflows.core.records import AttemptWrite, Commit, EntryWrite


def test_database_url() -> str:
    """A DATABASE_URL naming the test database, for child processes to share it."""
    return database_url(connection.settings_dict)


test_database_url.__test__ = False  # a helper, not a test


def now() -> dt.datetime:
    """The current time, aware and in UTC, as the engine's clock gives it."""
    return dt.datetime.now(dt.UTC)


def lock_waiters() -> int:
    """PostgreSQL: how many backends of the test database wait on a lock now (a test holding a
    row waits for the statement it blocks to be blocked)."""
    import psycopg

    from workflows.storage.django.notify import _libpq_params

    with psycopg.connect(**_libpq_params(), autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE wait_event_type = 'Lock' AND datname = current_database()"
        ).fetchone()
    return row[0]


def claimed_runs(n: int) -> list[str]:
    """n new runs of workflow "wf", claimed by owner "a" (a 30 s lease)."""
    from workflows.storage.django import DjangoStore

    store = DjangoStore()
    now = dt.datetime.now(dt.UTC)
    for i in range(n):
        store.get_or_create_run(NewRun(workflow="wf", key=[f"k{i}"], version="v", initial_state={}, now=now))
    runs = store.claim(owner="a", workflows=["wf"], limit=n, lease_seconds=30, now=now)
    assert len(runs) == n
    return [r.id for r in runs]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "condition") -> Any:
    """Poll `predicate` until it returns something true; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


ROOT = Path(__file__).resolve().parents[1]


def manage(env: dict[str, str], *args: str) -> str:
    """`manage.py ARGS` in a child process with `env` (e.g. a private cluster's DATABASE_URL); it
    must exit 0, else the assertion shows the end of what it said."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def wait_serving(
    url: str, alive: Callable[[], bool], said: Callable[[], str], timeout: float, what: str
) -> None:
    """Wait until GET `url` answers 200 (a server process starting); fail at once, with what it
    `said`, when the process is no longer `alive`."""

    def up() -> bool:
        if not alive():
            raise AssertionError(f"{what} exited:\n{said()[-3000:]}")
        try:
            return httpx2.get(url, timeout=2).status_code == 200
        except httpx2.HTTPError:
            return False

    wait_for(up, timeout, f"{what} to serve")


def a_step(position: int) -> Commit:
    """The commit of a completed step `s<position>` (output: its position), one attempt."""
    now = dt.datetime.now(dt.UTC)
    entry = EntryWrite(
        id=None, scope="", position=position, name=f"s{position}", kind="step", status="completed",
        output=position, attempts=1,
    )  # fmt: skip
    return Commit(entries=[(entry, AttemptWrite(number=1, started_at=now, finished_at=now, outcome="ok"))])
