"""`manage.py runworkflows` with its statements counted, for the idle-cost figures.

Installs a Django execute wrapper on every new database connection (signal `connection_created`)
that counts statements by kind: table queries, `PRAGMA data_version` polls (SQLite's change
watch, on the runner's loop connection too) and other PRAGMAs; on PostgreSQL it also counts the
statements of the LISTEN connection.
Then runs the very `runworkflows` command. SIGUSR1 writes the counts so far to $BENCH_COUNTS_PATH;
on SIGTERM the command stops gracefully and the final counts are printed to stdout as one line:
`BENCH_COUNTS {...}`.

    python bench/_counting_runner.py --concurrency 20
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COUNTS: Counter[str] = Counter()


def kind_of(sql: str) -> str:
    head = sql.lstrip()[:40].upper()
    if head.startswith("PRAGMA DATA_VERSION"):
        return "data_version"
    if head.startswith("PRAGMA"):
        return "pragma_other"
    if head.startswith("LISTEN"):
        return "listen"
    return "table"


def counting(execute, sql, params, many, context):
    COUNTS[kind_of(sql)] += 1
    return execute(sql, params, many, context)


def install() -> None:
    from django.db.backends.signals import connection_created

    def on_created(sender, connection, **kwargs):
        if counting not in connection.execute_wrappers:
            connection.execute_wrappers.append(counting)

    connection_created.connect(on_created, weak=False)

    # SQLite: a runner writing its step commits from its event loop asks that connection (no
    # Django cursor) for its change watch.
    from workflows.storage.django.sqlite_loop import SqliteLoopCommits

    loop_version = SqliteLoopCommits.version

    def version(self):
        COUNTS["data_version"] += 1
        return loop_version(self)

    SqliteLoopCommits.version = version  # type: ignore[method-assign]
    try:
        import psycopg
    except ImportError:
        return
    original = psycopg.AsyncConnection.execute

    async def execute(self, query, *args, **kwargs):  # the runner's LISTEN connection
        COUNTS["listen" if kind_of(str(query)) == "listen" else "listen_conn_other"] += 1
        return await original(self, query, *args, **kwargs)

    psycopg.AsyncConnection.execute = execute


def snapshot() -> dict:
    return {"at": time.monotonic(), "counts": dict(COUNTS)}


def dump(signum, frame) -> None:
    path = os.environ.get("BENCH_COUNTS_PATH")
    if path:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(snapshot(), f)
        os.replace(tmp, path)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    install()
    signal.signal(signal.SIGUSR1, dump)
    from django.core.management import call_command

    call_command("runworkflows", *sys.argv[1:])
    dump(None, None)
    print("BENCH_COUNTS " + json.dumps(snapshot()), flush=True)


if __name__ == "__main__":
    main()
