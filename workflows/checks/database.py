"""The database checks: SQLite's transactions (workflows.W003, registered), and what `runworkflows`
checks at start: several runners on one SQLite file (W004), a connection pool too small (E013)."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import connections

from .. import conf
from .base import DOCS


def check_sqlite(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    database = settings.DATABASES.get("default", {})
    if not database.get("ENGINE", "").endswith("sqlite3"):
        return []
    if (database.get("OPTIONS") or {}).get("transaction_mode") == "IMMEDIATE":
        return []
    return [
        checks.Warning(
            "The database is SQLite without IMMEDIATE transactions: the runner and the web process "
            "writing at once may fail with 'database is locked'.",
            hint='Set DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE", '
            '"init_command": "PRAGMA journal_mode=WAL; PRAGMA busy_timeout=30000;"}. ' + DOCS,
            id="workflows.W003",
        )
    ]


def sqlite_shared_runners(now: dt.datetime | None = None, using: str = "default") -> checks.Warning | None:
    """For `runworkflows` at start: on SQLite, a warning when another runner holds live leases
    (runs `running` with a lease that has not lapsed; a runner that just starts holds none)."""
    if connections[using].vendor != "sqlite":
        return None
    from django.utils import timezone

    from ..core.records import RunStatus
    from ..models import Run

    held = (
        Run.objects.using(using)
        .filter(status=RunStatus.RUNNING, wake_at__gt=now or timezone.now())
        .exclude(lease_owner="")
        .values_list("lease_owner", flat=True)
        .distinct()
    )
    owners = sorted(held[:4])
    owners = [o for o in owners if o not in _dead_here(owners, now or timezone.now(), using)]
    if not owners:
        return None
    return checks.Warning(
        f"Another runner holds live leases on this SQLite database ({', '.join(owners)}). SQLite "
        "serves one runner well; several runners take turns at its one write lock and gain nothing.",
        hint="Run one runworkflows per SQLite database (raise --concurrency instead), or use "
        "PostgreSQL to scale out over several runners. (A runner stopped less than "
        f"{conf.lease_seconds():g} s ago may still hold leases until they lapse.)",
        id="workflows.W004",
    )


def _dead_here(owners: list[str], now: dt.datetime, using: str) -> set[str]:
    """Of these lease owners, the runners of this host whose process has exited: the runner
    starting takes their runs over at once (engine.presence), so they share nothing with it."""
    from ..core.records import RunnerRecord
    from ..engine import presence
    from ..models import RunnerPresence
    from ..storage.django.presence import runner_record

    here = RunnerRecord(
        owner="", host=presence.hostname(), pid=os.getpid(), machine=presence.machine(), started_at=now,
        last_seen=now,
    )  # fmt: skip
    rows = RunnerPresence.objects.using(using).filter(owner__in=owners)
    return {r.owner for r in presence.dead_predecessors(here, [runner_record(row) for row in rows])}


def runner_pool_size_needed(db_threads: int, concurrency: int) -> int:
    """Connections a runner may hold from its pool at once: one per database thread (each keeps
    its connection for the runner's life), one per sync step running at once (asyncio's default
    executor, min(32, CPUs + 4) threads, and no more than `concurrency`; a sync step borrows a
    connection only while it runs), and one for the ORM's async calls in async steps. The LISTEN
    connection is opened outside the pool: count it in the server's max_connections only."""
    sync_threads = min(concurrency, 32, (os.cpu_count() or 1) + 4)
    return db_threads + sync_threads + 1


def runner_pool_too_small(
    db_threads: int, concurrency: int, database: Mapping[str, Any] | None = None, using: str = "default"
) -> checks.Error | None:
    """For `runworkflows` at start: an error when Django's connection pool (PostgreSQL's
    OPTIONS["pool"]; `database` is a DATABASES entry, `using`'s by default) cannot lend the runner
    every connection it may hold at once. A database thread that cannot get one would wait out
    the pool's timeout and fail on every call."""
    database = connections[using].settings_dict if database is None else database
    options = (database.get("OPTIONS") or {}).get("pool")
    if not str(database.get("ENGINE", "")).endswith(("postgresql", "postgis")) or not options:
        return None
    options = {} if options is True else options
    # psycopg_pool's defaults: min_size 4, max_size = min_size.
    max_size = options.get("max_size") or options.get("min_size", 4)
    needed = runner_pool_size_needed(db_threads, concurrency)
    if max_size >= needed:
        return None
    return checks.Error(
        f"The database connection pool lends at most {max_size} connections; this runner "
        f"(--db-threads {db_threads}, --concurrency {concurrency}) may hold {needed} at once: "
        f"{db_threads} database thread(s) for its life, "
        f"{needed - db_threads - 1} sync step(s) at once, 1 for async steps' ORM calls.",
        hint=f'Raise DATABASES["{using}"]["OPTIONS"]["pool"]["max_size"] to {needed} or more for the '
        "runner's process (DATABASE_POOL_MAX_SIZE in this project), or lower --db-threads / "
        "--concurrency. Count one more server connection per runner for its LISTEN.",
        id="workflows.E013",
    )
