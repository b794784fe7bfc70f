"""The engine benchmark of issue 2: prints figures for SQLite and PostgreSQL, then compares them
with the issue's targets. Never a timed test: it prints what it measured.

    .venv/bin/python bench/engine.py                  # both databases, ~5 minutes on 2 cores
    .venv/bin/python bench/engine.py --db postgres --json var/bench/figures.json
    .venv/bin/python bench/engine.py --quick --db sqlite   # a small smoke run

Per database, in a fresh database (PostgreSQL `bench_workflows`, created and dropped here;
SQLite `var/bench/bench.sqlite3`):
1. the physical floor: one committed single-row insert through Django's connection;
2. a recorded trivial step against a direct call of the same function, timed around each await
   inside one run executed by a real Runner over the real DjangoStore in this process;
3. a 10-step run from its creation to its completion commit (in-process, `Runner.run_due()`);
4. steps/s for N runs x 10 steps with 1 and with 2 `runworkflows --concurrency 20` processes;
5. `send` of a start message -> the first step starting, with an idle runner process;
6. an idle runner's RSS and statements per second with few and with many runs waiting.
Each database is measured in a child process of this script, since Django binds its database
when it starts. Progress goes to stderr, the table and the summary to stdout.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import ROOT, bench_env, progress, setup_django
from bench._db import create_database, drop_database
from bench._report import summary, table

FULL = {
    "floor": 1000,
    "steps": 500,
    "ten": 50,
    "throughput": 1000,
    "send": 50,
    "idle": (100, 10_000),
    "idle_fill": "clone",
    "window": 10.0,
}
QUICK = {
    "floor": 100,
    "steps": 50,
    "ten": 10,
    "throughput": 50,
    "send": 5,
    "idle": (20, 200),
    "idle_fill": "clone",
    "window": 1.5,
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not figures to quote")
    parser.add_argument("--json", metavar="PATH", help="also write every figure to this JSON file")
    parser.add_argument(
        "--idle-fill",
        choices=["clone", "runner"],
        help="how the idle runs come to wait: copies of an engine-suspended run inserted in bulk "
        "(default), or inserted pending and suspended by the measured runner itself",
    )
    parser.add_argument("--keep", action="store_true", help="keep the bench databases afterwards")
    parser.add_argument("--child", choices=["sqlite", "postgres"], help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def sizes_of(args: argparse.Namespace) -> dict:
    sizes = dict(QUICK if args.quick else FULL)
    if args.idle_fill:
        sizes["idle_fill"] = args.idle_fill
    return sizes


def child(args: argparse.Namespace) -> None:
    """Measure one database (DATABASE_URL names it) and write the figures to --out."""
    setup_django()
    from bench import _inprocess, _procs

    sizes = sizes_of(args)
    figures = _inprocess.measure(args.child, sizes)
    figures.update(_procs.measure(args.child, sizes))
    Path(args.out).write_text(json.dumps(figures, indent=2, default=str))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        child(args)
        return 0
    dbs = ["sqlite", "postgres"] if args.db == "both" else [args.db]
    sizes = sizes_of(args)
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        for db in dbs:
            create_database(db)
            out = Path(tmp) / f"{db}.json"
            command = [sys.executable, str(Path(__file__).resolve()), "--child", db, "--out", str(out)]
            if args.quick:
                command.append("--quick")
            if args.idle_fill:
                command += ["--idle-fill", args.idle_fill]
            try:
                done = subprocess.run(command, cwd=ROOT, env=bench_env(db))
            finally:
                if not args.keep:
                    drop_database(db)
            if done.returncode != 0:
                progress(f"{db}: the measuring process failed (exit {done.returncode})")
                return done.returncode
            results[db] = json.loads(out.read_text())
    print(table(results, sizes))
    print()
    print(summary(results))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"sizes": sizes, "results": results}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
