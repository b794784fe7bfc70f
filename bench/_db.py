"""The bench databases: created fresh for each run of the benchmark and dropped after it; rows
inserted in bulk exactly as the engine writes them."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from typing import Any

from ._common import BENCH_VAR, PG_DATABASE, PG_SERVER_URL, ROOT, SQLITE_PATH, bench_env, progress

_ENGINE_TABLES = (
    "workflows_attempt",
    "workflows_message",
    "workflows_event",
    "workflows_streamchunk",
    "workflows_auditentry",
    "workflows_entry",
    "workflows_run",
)


# --- in the parent: create and drop ------------------------------------------------------------


def _sqlite_files() -> list:
    return [SQLITE_PATH.with_name(SQLITE_PATH.name + suffix) for suffix in ("", "-wal", "-shm", "-journal")]


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def create_database(db: str) -> None:
    """A fresh, migrated bench database."""
    drop_database(db)
    if db == "sqlite":
        BENCH_VAR.mkdir(parents=True, exist_ok=True)
    else:
        _pg_admin(f"CREATE DATABASE {PG_DATABASE}")
    progress(f"{db}: migrating a fresh database")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--verbosity", "0"],
        cwd=ROOT,
        env=bench_env(db),
        check=True,
    )


def drop_database(db: str) -> None:
    if db == "sqlite":
        for path in _sqlite_files():
            path.unlink(missing_ok=True)
    else:
        _pg_admin(f"DROP DATABASE IF EXISTS {PG_DATABASE} WITH (FORCE)")


# --- in the measuring process (Django set up) --------------------------------------------------


def reset_tables(extra: tuple[str, ...] = ()) -> None:
    """Empty the engine's tables (and `extra` ones) between sections, so each starts from the same
    place."""
    from django.db import connection

    tables = (*_ENGINE_TABLES, *extra)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")
        else:
            for table in tables:
                cursor.execute(f"DELETE FROM {table}")


def analyze() -> None:
    """Fresh planner statistics after a bulk insert, as autovacuum would give a steady system."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")


def notify_runners() -> None:
    """What the engine's own writes do on PostgreSQL; SQLite runners see the commit by themselves."""
    from django.db import connection

    from workflows.storage.django.notify import NOTIFY_CHANNEL

    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, '')", [NOTIFY_CHANNEL])


def create_pending_runs(workflow_name: str, keys: list[list[str]]) -> list[str]:
    """Runs as `DjangoStore.get_or_create_run` creates them (pending, due now), in one transaction."""
    from django.db import transaction

    from workflows.conf import registry
    from workflows.core.keys import key_identity
    from workflows.models import Run

    definition = registry().get(workflow_name)
    now = dt.datetime.now(dt.UTC)
    rows = []
    for key in keys:
        key_text, key_hash = key_identity(key)
        rows.append(
            Run(
                workflow=workflow_name,
                key=key,
                key_text=key_text,
                key_hash=key_hash,
                version=definition.version,
                status=Run.Status.PENDING,
                state=definition.initial_state(),
                created_at=now,
                updated_at=now,
                wake_at=now,
            )
        )
    with transaction.atomic():
        Run.objects.bulk_create(rows, batch_size=500)
        notify_runners()
    return [str(r.id) for r in rows]


def clone_waiting_run(template_run_id: str, keys: list[list[str]]) -> None:
    """Copies of a run the engine itself suspended at its first queue wait: the same run row and
    the same waiting entry, under other keys. Verified field by field against the template."""
    from django.db import transaction

    from workflows.core.keys import key_identity
    from workflows.models import Entry, Run

    template = Run.objects.get(id=template_run_id)
    entries = list(Entry.objects.filter(run_id=template_run_id))
    run_fields = _copyable(Run, exclude={"id", "key", "key_text", "key_hash"})
    entry_fields = _copyable(Entry, exclude={"id", "run"})
    runs, children = [], []
    for key in keys:
        key_text, key_hash = key_identity(key)
        run = Run(
            key=key, key_text=key_text, key_hash=key_hash, **{f: getattr(template, f) for f in run_fields}
        )
        runs.append(run)
        children += [Entry(run=run, **{f: getattr(e, f) for f in entry_fields}) for e in entries]
    with transaction.atomic():
        Run.objects.bulk_create(runs, batch_size=500)
        Entry.objects.bulk_create(children, batch_size=500)


def _copyable(model: Any, exclude: set[str]) -> list[str]:
    return [
        f.attname if f.is_relation else f.name for f in model._meta.concrete_fields if f.name not in exclude
    ]
