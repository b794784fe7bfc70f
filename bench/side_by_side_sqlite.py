"""This engine and DBOS Transact side by side on SQLite (issue 10: "SQLite within the same ratios
to its own floor"): the in-process figures of `bench/side_by_side.py` (a 0-step and a 10-step
workflow, start -> result; the durable overhead per step) in interleaved rounds, each system in a
fresh SQLite file of its own, and beside each the floor: one committed single-row INSERT in that
very file, on a connection set as that system sets its own. Prints figures; never a timed test.

    .venv/bin/pip install -r requirements-bench-dbos.txt     # optional: DBOS 3.4.0, bench only
    .venv/bin/python bench/side_by_side_sqlite.py            # 3 rounds, about 2 minutes
    .venv/bin/python bench/side_by_side_sqlite.py --rounds 5 --runs 100
    .venv/bin/python bench/side_by_side_sqlite.py --thread-commits  # and through the thread

Three systems per round, because the two do not ask the same of the disk:
- DBOS: its SQLite system database as DBOS 3.4 opens it (`system_database_url="sqlite:///..."`):
  the rollback journal (SQLite's default) and synchronous=FULL, so every commit waits for the disk
  and survives a power loss;
- project: as `config/settings.py` opens it by default: WAL and synchronous=NORMAL, so a commit
  survives the process crashing (any crash a runner can have) but the last commits may roll back
  if the machine loses power or its OS crashes; no commit waits for the disk;
- project, SQLITE_SYNCHRONOUS=FULL: WAL with every commit waiting for the disk, as durable as DBOS.
A runner writes its step commits from its event loop (`workflows/storage/django/sqlite_loop.py`);
`--thread-commits` adds both project systems again with WORKFLOWS["CONNECTOR"] = "threads", every
commit through the database thread, as before that path existed.
DBOS runs `DBOS.start_workflow(wf)` then `handle.get_result()` in its own child process; the
project `runner.start(...)` then `runner.executed(...)` in a Django child process
(`bench/_sbs_project.py --in-process-only`). Both as in `bench/side_by_side.py`'s docstring.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("BENCH_VAR", str(_ROOT / "var" / "bench" / "side_by_side_sqlite"))

from bench._common import BENCH_VAR, ROOT, SQLITE_PATH, bench_env, progress, stats_ms  # noqa: E402
from bench._db import create_database, drop_database  # noqa: E402
from bench._speed import described  # noqa: E402

PROJECT_REGISTRIES = "bench.flows.registry,bench._sbs_flows.registry"
FLOOR_INSERTS = 500
# (label, SQLITE_SYNCHRONOUS for the project; None: DBOS)
SYSTEMS = (("DBOS", None), ("project", "NORMAL"), ("project, FULL", "FULL"))
# --thread-commits adds these: the project with WORKFLOWS["CONNECTOR"] "threads", every step's
# commit through its database thread rather than from its event loop (`sqlite_loop`)
THREAD_SYSTEMS = (("project, thread", "NORMAL"), ("project, FULL, thread", "FULL"))


def floor(path: Path, pragmas: list[str]) -> dict[str, Any]:
    """One committed single-row INSERT at a time (autocommit) on a connection set with `pragmas`,
    in the system's own file (its journal mode is the file's)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for pragma in pragmas:
            conn.execute(pragma)
        journal = conn.execute("PRAGMA journal_mode").fetchone()[0]
        synchronous = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[
            conn.execute("PRAGMA synchronous").fetchone()[0]
        ]
        conn.execute("DROP TABLE IF EXISTS bench_sbs_floor")
        conn.execute("CREATE TABLE bench_sbs_floor (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        samples = []
        for i in range(FLOOR_INSERTS + 20):
            t0 = time.perf_counter()
            conn.execute("INSERT INTO bench_sbs_floor (v) VALUES (?)", [i])
            if i >= 20:  # warm-up
                samples.append(time.perf_counter() - t0)
        conn.execute("DROP TABLE bench_sbs_floor")
    finally:
        conn.close()
    return {**stats_ms(samples), "journal_mode": journal, "synchronous": synchronous}


def run_dbos(runs: int, tmp: Path) -> dict[str, Any]:
    path = tmp / "dbos.sqlite3"
    for suffix in ("", "-journal", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    out = tmp / "dbos.json"
    command = [
        sys.executable, str(ROOT / "bench" / "_sbs_dbos.py"), "inprocess",
        "--url", f"sqlite:///{path}", "--n", str(runs), "--out", str(out),
    ]  # fmt: skip
    subprocess.run(command, cwd=ROOT, check=True)
    figures = json.loads(out.read_text())
    figures["floor"] = floor(
        path, ["PRAGMA busy_timeout=30000", "PRAGMA foreign_keys=ON"]
    )  # as DBOS sets them
    return figures


def run_project(runs: int, synchronous: str, tmp: Path, thread_commits: bool = False) -> dict[str, Any]:
    os.environ["SQLITE_SYNCHRONOUS"] = synchronous  # create_database migrates with bench_env()
    create_database("sqlite")
    try:
        out = tmp / "project.json"
        env = bench_env("sqlite") | {
            "WORKFLOWS_REGISTRIES": PROJECT_REGISTRIES,
            "SQLITE_SYNCHRONOUS": synchronous,
        }
        command = [
            sys.executable, str(ROOT / "bench" / "_sbs_project.py"), "--in-process-only",
            "--sizes", json.dumps({"ten": runs}), "--out", str(out),
        ] + (["--thread-commits"] if thread_commits else [])  # fmt: skip
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        figures = json.loads(out.read_text())
        # as config/settings.py sets its connections (the file is already in WAL mode)
        figures["floor"] = floor(
            SQLITE_PATH, [f"PRAGMA synchronous={synchronous}", "PRAGMA busy_timeout=30000"]
        )
    finally:
        drop_database("sqlite")
    return figures


def headline(f: dict[str, Any]) -> dict[str, float]:
    ten, zero = f["ten"]["to_result"]["median_ms"], f["zero"]["to_result"]["median_ms"]
    overhead = (ten - zero) / 10
    return {
        "floor": f["floor"]["median_ms"], "overhead": overhead, "zero": zero, "ten": ten,
        "per_floor": overhead / f["floor"]["median_ms"],  # against its own floor of the same round
    }  # fmt: skip


ROWS = (
    ("floor: one committed single-row insert, median ms", "floor"),
    ("durable overhead per step, (10-step - 0-step) / 10, median ms", "overhead"),
    ("0-step workflow, start -> result, median ms", "zero"),
    ("10-step workflow, start -> result, median ms", "ten"),
)


def table(heads: dict[str, dict[str, float]]) -> str:
    labels = list(heads)
    dbos = heads.get("DBOS")
    ratio_cols = [label for label in labels if label != "DBOS"] if dbos else []
    lines = [
        "| figure | " + " | ".join(labels) + "".join(f" | {c} / DBOS" for c in ratio_cols) + " |",
        "|---|" + "---|" * (len(labels) + len(ratio_cols)),
    ]
    for title, key in ROWS:
        cells = [f"{heads[label][key]:.3f}" for label in labels]
        cells += [f"{heads[c][key] / dbos[key]:.2f}" for c in ratio_cols] if dbos else []
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    cells = [f"{heads[label]['per_floor']:.1f}" for label in labels]
    lines.append("| per step / its own floor | " + " | ".join(cells) + " |" + " - |" * len(ratio_cols))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--runs", type=int, default=50, help="0-step and 10-step runs each, per system and round"
    )
    parser.add_argument("--no-dbos", action="store_true", help="measure the project side only")
    parser.add_argument(
        "--thread-commits",
        action="store_true",
        help="also the project with every commit through its database thread (CONNECTOR 'threads')",
    )
    args = parser.parse_args()
    with_dbos = not args.no_dbos and importlib.util.find_spec("dbos") is not None
    if not with_dbos and not args.no_dbos:
        progress("dbos is not installed (pip install -r requirements-bench-dbos.txt): the project side only")
    systems = [s for s in SYSTEMS if with_dbos or s[1] is not None]
    systems += list(THREAD_SYSTEMS) if args.thread_commits else []
    BENCH_VAR.mkdir(parents=True, exist_ok=True)
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rounds: list[dict[str, dict[str, Any]]] = []
    with tempfile.TemporaryDirectory(dir=BENCH_VAR) as tmp:
        for r in range(args.rounds):
            figures = {}
            for label, synchronous in systems:
                progress(f"round {r + 1}/{args.rounds}: {label}")
                if synchronous is None:
                    figures[label] = run_dbos(args.runs, Path(tmp))
                else:
                    thread = (label, synchronous) in THREAD_SYSTEMS
                    figures[label] = run_project(args.runs, synchronous, Path(tmp), thread)
            rounds.append(figures)
    load_end = " ".join(f"{x:.2f}" for x in os.getloadavg())
    settings = ", ".join(
        f"{label}: journal_mode={f['floor']['journal_mode']}, synchronous={f['floor']['synchronous']}"
        for label, f in rounds[0].items()
    )
    print(
        f"Side by side on SQLite: this engine and DBOS Transact, in-process figures (issue 10)\n"
        f"date {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; load average at start {load_start}, at end "
        f"{load_end}; SQLite {sqlite3.sqlite_version}; {args.runs} runs of each per system and round\n"
        f"{described()}\n"
        f"{settings}\n"
    )
    heads = [{label: headline(f) for label, f in figures.items()} for figures in rounds]
    for r, head in enumerate(heads):
        print(f"Round {r + 1}\n\n{table(head)}\n")
    median = {
        label: {key: statistics.median(h[label][key] for h in heads) for key in heads[0][label]}
        for label in heads[0]
    }  # each figure's median over the rounds (a ratio too: the median of the rounds' ratios)
    print(f"Median of {len(heads)} round(s)\n\n{table(median)}")


if __name__ == "__main__":
    main()
