"""An old history written by the database itself: completed runs of N steps with their entries,
attempts, events and messages, in a few INSERT ... SELECT generate_series statements (PostgreSQL;
the run ids are md5 hashes, as random as uuid4s). For the benchmarks that ask how the hot path
fares beside a large history (`bench/prune.py`, `bench/run_ids.py`)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from ._common import PG_SERVER_URL, ROOT, progress
from ._db import create_database, drop_database

OLD_DAYS = 60  # the old runs finished this long ago


def fill(runs: int, steps: int) -> dict[str, float]:
    """Old completed runs with their history, written by the database itself."""
    from django.db import connection

    statements = {
        "runs": (
            "INSERT INTO workflows_run (id, workflow, key, key_text, key_hash, version, status, state,"
            " result, error, created_at, updated_at, transitioned_at, started_at, finished_at, wake_at,"
            " lease_owner, cancel_requested, epoch, priority)"
            " SELECT md5('old' || g)::uuid, 'old', jsonb_build_array('k' || g), '[\"k' || g || '\"]',"
            " md5('k' || g), '', 'completed', '{\"stage\": \"done\"}'::jsonb, '\"ok\"'::jsonb, NULL,"
            " t, t + interval '1 minute', t + interval '1 minute', t, t + interval '1 minute', NULL, '',"
            " false, 0, 0"
            " FROM generate_series(1, %s) g,"
            f" LATERAL (SELECT now() - interval '{OLD_DAYS} days' - g * interval '1 second' AS t) s"
        ),
        "entries": (
            "INSERT INTO workflows_entry (run_id, scope, position, name, kind, status, input, output,"
            " error, meta, attempts, started_at, finished_at, wake_at, superseded)"
            " SELECT r.id, '', p, 'step-' || p, 'step', 'completed', NULL,"
            ' \'{"ok": true, "n": 1}\'::jsonb, NULL, NULL, 1, r.started_at, r.finished_at, NULL, false'
            " FROM workflows_run r, generate_series(0, %s - 1) p WHERE r.workflow = 'old'"
        ),
        "attempts": (
            "INSERT INTO workflows_attempt (entry_id, number, started_at, finished_at, outcome, error,"
            " delay, retry_at) SELECT e.id, 1, e.started_at, e.finished_at, 'ok', NULL, NULL, NULL"
            " FROM workflows_entry e"
        ),
        "events": (
            "INSERT INTO workflows_event (run_id, name, payload, created_at, scope, step, attempt, lost)"
            " SELECT r.id, 'progress', '{\"stage\": \"done\"}'::jsonb, r.finished_at, '', '', NULL, false"
            " FROM workflows_run r WHERE r.workflow = 'old'"
        ),
        "messages": (
            "INSERT INTO workflows_message (run_id, queue, body, sent_at, consumed_at, consumed_by_id,"
            " response, completed_at)"
            " SELECT r.id, 'start', '{\"go\": true}'::jsonb, r.created_at, r.created_at, NULL, NULL, NULL"
            " FROM workflows_run r WHERE r.workflow = 'old'"
        ),
    }
    params = {"runs": [runs], "entries": [steps]}
    seconds = {}
    with connection.cursor() as cursor:
        for name, sql in statements.items():
            started = time.perf_counter()
            cursor.execute(sql, params.get(name, []))
            seconds[name] = time.perf_counter() - started
            progress(f"filled {name}: {cursor.rowcount:,} rows in {seconds[name]:.1f}s")
        started = time.perf_counter()
        cursor.execute("VACUUM ANALYZE")
        seconds["vacuum analyze"] = time.perf_counter() - started
    return seconds


def history_arguments(parser: argparse.ArgumentParser, runs: int) -> None:
    """The options every history bench takes (and the hidden one its child is run with)."""
    parser.add_argument("--runs", type=int, default=runs, help=f"old completed runs (default {runs:,})")
    parser.add_argument("--steps", type=int, default=10, help="entries per old run (default 10)")
    parser.add_argument("--keep", action="store_true", help="keep the bench database afterwards")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def in_own_database(script: str, argv: list[str] | None, keep: bool) -> int:
    """The parent's part: a fresh migrated database (`BENCH_PG_DATABASE`), `script --child` with
    the same options measuring in it (Django set up on it there), then the database dropped
    unless `keep`."""
    progress(f"creating the database {os.environ['BENCH_PG_DATABASE']} on {PG_SERVER_URL}")
    create_database("postgres")
    try:
        forwarded = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--keep"]
        subprocess.run([sys.executable, script, "--child", *forwarded], cwd=ROOT, check=True)
    finally:
        if not keep:
            drop_database("postgres")
    return 0
