"""This engine and DBOS Transact side by side (issue 10): the same workloads, in one invocation,
interleaved (DBOS, project, DBOS, project... one round each, default 3 rounds) on the same
PostgreSQL server, each system in its own fresh database created and dropped here
(`bench_sbs_dbos`, `bench_sbs_project`), fsync and synchronous_commit as the server has them.
Prints figures; never a timed test.

    .venv/bin/pip install -r requirements-bench-dbos.txt     # optional: DBOS 3.4.0, bench only
    .venv/bin/python bench/side_by_side.py                   # 3 rounds, ~10 minutes on 2 cores
    .venv/bin/python bench/side_by_side.py --rounds 5 --json var/bench/side_by_side.json
    .venv/bin/python bench/side_by_side.py --quick --no-dbos # smoke run, project side only

What is measured, and how, for each system (DBOS in child processes of its own so its globals
never meet Django's; the project in a Django child process):
- floor: one committed single-row INSERT on one autocommit psycopg connection, in the system's own
  database just before its round (median ms; its inverse mean is the floor of steps/s);
- 0-step and 10-step workflow, start -> result, in the measuring process, alternately, median ms.
  DBOS: `DBOS.start_workflow(wf)` then `handle.get_result()` (steps are `@DBOS.step` functions
  returning 7): the workflow runs in the process that starts it. Project, the same way:
  `runner.start(name, key)` (a Runner built as `runworkflows` builds it, over the real
  DjangoStore: the run is created leased to it and executed at once), `runner.executed(run_id)`,
  then `handle.ainfo()` read back completed. Two more rows, the project only: the same runs
  started through `client.aget_or_create(key)` and executed by `runner.run_due()` (a claim, as a
  run started in another process is run), interleaved with the others;
- durable overhead per step = (10-step - 0-step) / 10, from those medians;
- steps/s: N runs x 10 steps submitted in one transaction while 2 idle worker processes wait,
  counted from the steps' own start/finish timestamps. DBOS: 2 processes each launching DBOS and
  dequeuing a queue registered with worker_concurrency=20 (polling interval --dbos-poll, DBOS's
  default is 1 s); the runs enqueued with `DBOSClient.enqueue_in_transaction`. Project: 2
  `manage.py runworkflows --concurrency 20`, runs inserted pending as the store creates them;
  then N more on the same, now warm, workers (printed apart: a process's first seconds pay for what
  it keeps after, such as the plans of its statements, which PostgreSQL makes anew at a prepared
  statement's first five executions); each also over the system's own floor inserts/s;
- submit while busy: with the same 2 workers draining a backlog, the submit call alone, one at a
  time, 15 ms apart: DBOS `DBOSClient.enqueue(...)`, project `client.get_or_create(key)`; 5 ms
  after each, the floor insert on a connection of its own, timed the same way (how much that
  system's busy workers slow any commit on the machine: a system whose workers do more work per
  second leaves less of the 2 cores and of the disk to everything else), and 5 ms later the same
  insert with `synchronous_commit = off` (what is left of it without the wait for the WAL flush);
  over the same window, how busy both CPUs (`/proc/stat`) and the disk under PostgreSQL's data
  directory (`/proc/diskstats`: busy %, writes and cache flushes per second and their mean time)
  were, to tell a wait for the disk from a wait for a CPU (`bench/_machine.py`);
- submit beside workers doing DBOS's work rate (the project only; DBOS's figure is its submit
  while busy, above, its workers draining flat out at that rate): the same submits and floor
  inserts while the project's 2 runner processes complete 10-step runs started at a steady pace
  (`bench/_pacer.py`, a process of its own) adding up to DBOS's drained steps/s of the same round
  (250 without DBOS), instead of draining a backlog flat out; the steps/s they completed meanwhile
  is printed under it;
- send -> first step: one worker process with N runs waiting; one at a time, the sender's
  `time.time()` before the send against the wall-clock time the step after the wait began
  (returned by that step). DBOS: `DBOSClient.send(id, {}, "start")` to a workflow blocked in
  `DBOS.recv("start")`; project: `handle.send("start", {})` to a run suspended on
  `ctx.queue.next` (`bench/_procs.send_latency`);
- per step on PostgreSQL: statements (pg_stat_statements when the server preloads it is not
  needed: counted in the client, Django execute wrappers / SQLAlchemy cursor events, BEGIN and
  COMMIT not included), transactions (`pg_stat_database.xact_commit`), WAL bytes (this database's
  WAL records, via pg_walinspect, also split by the table or index each record touches, row
  locks apart; the server-wide `pg_current_wal_lsn()` difference too), tuple writes and index
  insertions (`pg_stat_user_tables`), as (window of n 10-step runs - window of n
  0-step runs) / 10n; per 0-step run as (0-step window - an empty window) / n. See bench/_sbs_pg.py.
- group commit: the project's runners log at stop how many step commits their stores wrote in how
  many statements (several runs' commits share one when ready together); the details print it.
Each system's timed figures start after a CHECKPOINT that follows its database's creation and
migrations (DBOS migrates at launch, in its driver): a fresh database's dirty pages would otherwise
compete with the first figures' commits for the disk (a 0-step run measured 5.6 ms right after a
migration, 3.2 ms after a checkpoint, one after the other on 2026-12-03).
Progress goes to stderr, the tables to stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_ROOT = Path(__file__).resolve().parents[1]
# The bench's own databases and log folder, set before bench._common reads them.
os.environ.setdefault("BENCH_PG_DATABASE", "bench_sbs_project")
os.environ.setdefault("BENCH_VAR", str(_ROOT / "var" / "bench" / "side_by_side"))

from bench import _sbs_pg  # noqa: E402
from bench._common import BENCH_VAR, PG_SERVER_URL, ROOT, bench_env, database_url, progress  # noqa: E402
from bench._db import create_database, drop_database  # noqa: E402
from bench._speed import reference_ms_text  # noqa: E402

DBOS_DATABASE = os.environ.get("BENCH_DBOS_DATABASE", "bench_sbs_dbos")
PROJECT_REGISTRIES = "bench.flows.registry,bench._sbs_flows.registry"

FULL = {
    "floor": 500,
    "ten": 50,
    "stats": 30,
    "throughput": 1000,
    "backlog": 1000,
    "submits": 50,
    "send": 100,
    "dbos_poll": 0.05,
}
QUICK = {
    "floor": 50,
    "ten": 5,
    "stats": 3,
    "throughput": 50,
    "backlog": 60,
    "submits": 5,
    "send": 3,
    "dbos_poll": 0.05,
}
SYSTEMS = ("dbos", "project")
# The pace of the project's paced submits: DBOS's drained steps/s of the same round, or (no DBOS
# measured) about what it drains on 2 cores.
PACED_DEFAULT = 250.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default 3; 1 with --quick)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run, not figures to quote")
    parser.add_argument("--json", metavar="PATH", help="also write every figure to this JSON file")
    parser.add_argument("--no-dbos", action="store_true", help="measure the project side only")
    parser.add_argument(
        "--dbos-poll",
        type=float,
        help="DBOS queue polling interval in seconds (default 0.05; DBOS's own default is 1.0)",
    )
    args = parser.parse_args(argv)
    if args.rounds is None:
        args.rounds = 1 if args.quick else 3
    return args


def dbos_url() -> str:
    return f"{PG_SERVER_URL.replace('postgres://', 'postgresql://', 1)}/{DBOS_DATABASE}"


def _pg_admin(sql: str) -> None:
    import psycopg

    with psycopg.connect(f"{PG_SERVER_URL}/postgres", autocommit=True) as conn:
        conn.execute(sql)


def _loadavg() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


# --- one round of one system -----------------------------------------------------------------------


def run_dbos(sizes: dict[str, Any], tmp: Path) -> dict[str, Any]:
    _pg_admin(f"DROP DATABASE IF EXISTS {DBOS_DATABASE} WITH (FORCE)")
    _pg_admin(f"CREATE DATABASE {DBOS_DATABASE}")
    try:
        url = dbos_url()
        walinspect = _sbs_pg.enable_walinspect(url)
        _sbs_pg.checkpoint(url)
        floor = _sbs_pg.floor(url, sizes["floor"])
        out = tmp / "dbos.json"
        command = [
            sys.executable,
            str(ROOT / "bench" / "_sbs_dbos.py"),
            "driver",
            "--url",
            url,
            "--sizes",
            json.dumps(sizes),
            "--out",
            str(out),
            "--log-dir",
            str(BENCH_VAR),
        ]
        subprocess.run(command, cwd=ROOT, check=True)
        figures = json.loads(out.read_text())
    finally:
        _pg_admin(f"DROP DATABASE IF EXISTS {DBOS_DATABASE} WITH (FORCE)")
    figures["floor"] = floor
    figures["walinspect"] = walinspect
    return figures


def run_project(sizes: dict[str, Any], tmp: Path) -> dict[str, Any]:
    create_database("postgres")
    try:
        url = database_url("postgres")
        walinspect = _sbs_pg.enable_walinspect(url)
        _sbs_pg.checkpoint(url)  # after the migrations (DBOS: after its own, in its driver)
        floor = _sbs_pg.floor(url, sizes["floor"])
        out = tmp / "project.json"
        env = bench_env("postgres")
        env["WORKFLOWS_REGISTRIES"] = PROJECT_REGISTRIES
        command = [
            sys.executable,
            str(ROOT / "bench" / "_sbs_project.py"),
            "--sizes",
            json.dumps(sizes),
            "--out",
            str(out),
        ]
        subprocess.run(command, cwd=ROOT, env=env, check=True)
        figures = json.loads(out.read_text())
    finally:
        drop_database("postgres")
    figures["floor"] = floor
    figures["walinspect"] = walinspect
    return figures


# --- figures ------------------------------------------------------------------------------------------


def headline(f: dict[str, Any]) -> dict[str, float | None]:
    ten, zero = f["ten"]["to_result"]["median_ms"], f["zero"]["to_result"]["median_ms"]
    return {
        "overhead_ms": (ten - zero) / 10,
        # against the floor insert in this system's own database, just before its round
        "overhead_per_floor": (ten - zero) / 10 / f["floor"]["median_ms"],
        "ten_ms": ten,
        "zero_ms": zero,
        "submit_ms": f["submit_busy"]["median_ms"],
        "floor_busy_ms": f["submit_busy"]["floor"]["median_ms"] if "floor" in f["submit_busy"] else None,
        "floor_busy_no_wait_ms": f["submit_busy"].get("floor_no_flush_wait", {}).get("median_ms"),
        "cpu_busy_pct": _machine_figure(f["submit_busy"], "cpu_busy_pct"),
        "disk_busy_pct": _machine_figure(f["submit_busy"], "disk", "busy_pct"),
        # Workers at DBOS's drained rate: the project paced to it; DBOS's own busy figures are that.
        "submit_paced_ms": (f.get("submit_paced") or f["submit_busy"])["median_ms"],
        "floor_paced_ms": (f.get("submit_paced") or f["submit_busy"]).get("floor", {}).get("median_ms"),
        "paced_steps_per_s": (f.get("submit_paced") or {}).get("steps_per_s", f["throughput"]["steps_per_s"]),
        "steps_per_s": f["throughput"]["steps_per_s"],
        "steps_per_floor": _per_floor(f["throughput"], f["floor"]),
        # The same workers draining as many runs again, now warm (None: a result from before it).
        "warm_steps_per_s": (f["throughput"].get("warm") or {}).get("steps_per_s"),
        "warm_steps_per_floor": _per_floor(f["throughput"].get("warm"), f["floor"]),
        "send_median_ms": f["send"]["median_ms"],
        "send_p99_ms": f["send"]["p99_ms"],
        # The project only: the same runs through a client and a claim (see _sbs_project.WAYS).
        "zero_claim_ms": f["zero_claim"]["to_result"]["median_ms"] if "zero_claim" in f else None,
        "ten_claim_ms": f["ten_claim"]["to_result"]["median_ms"] if "ten_claim" in f else None,
    }


def _per_floor(drain: dict[str, Any] | None, floor: dict[str, Any]) -> float | None:
    """A drain's steps/s over the floor's inserts/s (None: no such drain)."""
    return None if drain is None else drain["steps_per_s"] / floor["per_s"]


def _machine_figure(window: dict[str, Any], *path: str) -> float | None:
    """A figure of `bench/_machine.window` read over a submit phase (None when not measured)."""
    value: Any = window.get("machine")
    for name in path:
        value = value.get(name) if isinstance(value, dict) else None
    return value


RUN_TABLE = {"dbos": "dbos.workflow_status", "project": "public.workflows_run"}


def per_step(f: dict[str, Any], system: str) -> dict[str, float | None]:
    pg = f["pg"]
    n = pg["n"]
    empty, zero, ten = pg["empty"], pg["zero"], pg["ten"]

    def step(value_of) -> float | None:
        a, b = value_of(ten), value_of(zero)
        return None if a is None or b is None else (a - b) / (10 * n)

    def run(value_of) -> float | None:
        a, b = value_of(zero), value_of(empty)
        return None if a is None or b is None else (a - b) / n

    def wal(w: dict[str, Any]) -> int | None:
        return w["wal_db"]["bytes"] if w.get("wal_db") else None

    runs = ten["tables"].get(RUN_TABLE[system], {})
    return {
        "statements_per_step": step(lambda w: w["statements"]),
        "statements_per_zero_run": run(lambda w: w["statements"]),
        "xacts_per_step": step(lambda w: w["xact_commit"]),
        "xacts_per_zero_run": run(lambda w: w["xact_commit"]),
        "wal_bytes_per_step": step(wal),
        "wal_bytes_per_zero_run": run(wal),
        "wal_lsn_bytes_per_step_server": step(lambda w: w["wal_lsn_bytes_server"]),
        "index_inserts_per_step": step(lambda w: w["index_inserts_est"]),
        "index_inserts_per_zero_run": run(lambda w: w["index_inserts_est"]),
        "tuple_ins_per_step": step(lambda w: sum(t["ins"] for t in w["tables"].values())),
        "tuple_upd_per_step": step(lambda w: sum(t["upd"] for t in w["tables"].values())),
        "run_row_upd_per_ten_run": runs.get("upd", 0) / n,
        "run_row_hot_upd_per_ten_run": runs.get("hot_upd", 0) / n,
    }


def _median(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def _fmt(v: float | None, digits: int = 2) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def _ratio(project: float | None, dbos: float | None) -> str:
    if project is None or dbos is None or dbos == 0:
        return "-"
    return f"{project / dbos:.2f}"


ROWS = (
    # key, label, digits, floor (kind, multiple)
    ("overhead_ms", "durable overhead per step, (10-step - 0-step) / 10, median ms", 3, ("ms", 1)),
    ("overhead_per_floor", "... divided by the system's own floor insert of the round", 2, None),
    ("ten_ms", "10-step workflow, start -> result, median ms (floor: 10 inserts)", 2, ("ms", 10)),
    ("zero_ms", "0-step workflow, start -> result, median ms (floor: 1 insert)", 2, ("ms", 1)),
    ("submit_ms", "submit one run, 2 workers busy, median ms (floor: 1 insert)", 2, ("ms", 1)),
    (
        "floor_busy_ms",
        "... one floor insert at the same moments (after each submit), median ms",
        2,
        ("ms", 1),
    ),
    (
        "floor_busy_no_wait_ms",
        "... the same insert not waiting for its WAL flush (synchronous_commit off), median ms",
        2,
        ("ms", 1),
    ),
    ("cpu_busy_pct", "... both CPUs busy meanwhile, % (/proc/stat)", 0, None),
    ("disk_busy_pct", "... PostgreSQL's disk busy meanwhile, % (/proc/diskstats)", 0, None),
    (
        "submit_paced_ms",
        "submit one run, 2 workers doing DBOS's drained steps/s (DBOS: as above), median ms",
        2,
        ("ms", 1),
    ),
    ("floor_paced_ms", "... one floor insert at the same moments, median ms", 2, ("ms", 1)),
    ("paced_steps_per_s", "... steps/s the workers completed meanwhile", 0, None),
    ("steps_per_s", "steps/s, N x 10-step runs, 2 worker processes (floor: inserts/s)", 0, ("per_s", 1)),
    ("steps_per_floor", "... divided by the system's own floor inserts/s of the round", 2, None),
    ("warm_steps_per_s", "... N more on the same workers, now warm: steps/s", 0, ("per_s", 1)),
    ("warm_steps_per_floor", "... divided by the system's own floor inserts/s of the round", 2, None),
    ("send_median_ms", "send -> first step starts, median ms", 2, None),
    ("send_p99_ms", "send -> first step starts, p99 ms", 2, None),
    ("zero_claim_ms", "project only: 0-step run via a client, then a claim, median ms", 2, ("ms", 1)),
    ("ten_claim_ms", "project only: 10-step run via a client, then a claim, median ms", 2, ("ms", 10)),
)

PG_ROWS = (
    ("statements_per_step", "statements per step (client-counted, no BEGIN/COMMIT)", 2),
    ("xacts_per_step", "committed transactions per step (pg_stat_database)", 2),
    ("wal_bytes_per_step", "WAL bytes per step (this database's records, pg_walinspect)", 0),
    ("wal_lsn_bytes_per_step_server", "WAL bytes per step (server-wide LSN difference)", 0),
    ("index_inserts_per_step", "index insertions per step (estimate, see below)", 2),
    ("tuple_ins_per_step", "rows inserted per step", 2),
    ("tuple_upd_per_step", "rows updated per step", 2),
    ("statements_per_zero_run", "statements per 0-step run", 1),
    ("xacts_per_zero_run", "committed transactions per 0-step run", 1),
    ("wal_bytes_per_zero_run", "WAL bytes per 0-step run (this database's records)", 0),
    ("index_inserts_per_zero_run", "index insertions per 0-step run (estimate)", 1),
    ("run_row_upd_per_ten_run", "run row updates per 10-step run (workflow_status / workflows_run)", 1),
    ("run_row_hot_upd_per_ten_run", "... of which HOT updates (n_tup_hot_upd)", 1),
)


def floor_cells(floors: list[dict[str, Any]]) -> dict[str, float]:
    return {
        "ms": statistics.median(f["median_ms"] for f in floors),
        "per_s": statistics.median(f["per_s"] for f in floors),
    }


def headline_table(title: str, heads: dict[str, dict[str, float] | None], floor: dict[str, float]) -> str:
    lines = [
        title,
        "",
        "| figure | floor | DBOS | project | project / DBOS |",
        "|---|---|---|---|---|",
    ]
    for key, label, digits, fl in ROWS:
        d = heads["dbos"][key] if heads.get("dbos") else None
        p = heads["project"][key] if heads.get("project") else None
        floor_cell = "-" if fl is None else _fmt(floor[fl[0]] * fl[1], 3 if fl[0] == "ms" else 0)
        lines.append(f"| {label} | {floor_cell} | {_fmt(d, digits)} | {_fmt(p, digits)} | {_ratio(p, d)} |")
    return "\n".join(lines)


def pg_table(title: str, steps: dict[str, dict[str, float | None] | None]) -> str:
    lines = [title, "", "| per step on PostgreSQL | DBOS | project | project / DBOS |", "|---|---|---|---|"]
    for key, label, digits in PG_ROWS:
        d = steps["dbos"][key] if steps.get("dbos") else None
        p = steps["project"][key] if steps.get("project") else None
        lines.append(f"| {label} | {_fmt(d, digits)} | {_fmt(p, digits)} | {_ratio(p, d)} |")
    return "\n".join(lines)


def tables_written(f: dict[str, Any]) -> str:
    n = f["pg"]["n"]
    parts = []
    for name, t in sorted(f["pg"]["ten"]["tables"].items()):
        parts.append(
            f"{name} ins {t['ins'] / n:.1f} upd {t['upd'] / n:.1f} (HOT {t['hot_upd'] / n:.1f}) "
            f"del {t['del'] / n:.1f}, {t['indexes']} indexes"
        )
    return "; ".join(parts)


def wal_by_relation(f: dict[str, Any], top: int = 12) -> str:
    """A step's WAL bytes by the relation its records touch, (10-step window - 0-step window) /
    10n, largest first: where a step's WAL goes (heap rows, each index, row locks, commits)."""
    pg = f["pg"]
    ten, zero = pg["ten"].get("wal_db"), pg["zero"].get("wal_db")
    if not ten or not zero or "by_relation" not in ten:
        return "-"
    names = set(ten["by_relation"]) | set(zero["by_relation"])
    per_step = {
        name: (ten["by_relation"].get(name, 0) - zero["by_relation"].get(name, 0)) / (10 * pg["n"])
        for name in names
    }
    largest = sorted(per_step.items(), key=lambda item: -item[1])[:top]
    return "; ".join(f"{name} {value:,.0f}" for name, value in largest if value >= 1)


def detail_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = []
    for i, round_ in enumerate(results, 1):
        for system in SYSTEMS:
            f = round_.get(system)
            if not f:
                continue
            tp, busy = f["throughput"], f["submit_busy"]
            cpu = tp.get("runner_cpu_ms_per_step", tp.get("worker_cpu_ms_per_step"))
            grouped = tp.get("group_commit") or {}
            if grouped.get("statements"):
                lines.append(
                    f"round {i} {system}: group commit wrote {grouped['commits']} step commits in "
                    f"{grouped['statements']} statements ({grouped['commits'] / grouped['statements']:.1f} "
                    f"per statement, at most {grouped['largest']}) over the throughput and submit phases"
                )
            if grouped.get("claims"):
                lines.append(
                    f"round {i} {system}: the runners took {grouped['claimed']} runs in {grouped['claims']} "
                    f"claims ({grouped['claimed'] / grouped['claims']:.1f} per claim) over all the phases"
                )
            disk = _machine_figure(busy, "disk")
            if disk:
                lines.append(
                    f"round {i} {system}: PostgreSQL's disk over the submits beside busy workers: "
                    f"{_fmt(disk['writes_per_s'], 0)} writes/s ({_fmt(disk['ms_per_write'], 3)} ms each), "
                    f"{_fmt(disk['flushes_per_s'], 0)} cache flushes/s ({_fmt(disk['ms_per_flush'], 3)} ms "
                    f"each), busy {_fmt(disk['busy_pct'], 0)}%; CPUs busy {_fmt(busy['machine']['cpu_busy_pct'], 0)}%"
                )
            for label, drain in (("the drain", tp), ("the warm drain", tp.get("warm") or {})):
                worker, server = (
                    drain.get("runner_cpu_ms_per_step", drain.get("worker_cpu_ms_per_step")),
                    drain.get("postgres_cpu_ms_per_step"),
                )
                if worker is not None and server is not None:
                    lines.append(
                        f"round {i} {system}: CPU per step over {label}: workers {worker:.3f} ms, PostgreSQL "
                        f"{server:.3f} ms, together {worker + server:.3f} ms (2 cores: at most "
                        f"{2000 / (worker + server):,.0f} steps/s)"
                    )
            lines.append(
                f"round {i} {system}: throughput {tp['steps']} steps over {tp['span_s']:.2f}s "
                f"(wall {tp['wall_s']:.2f}s, worker CPU {cpu:.2f} ms/step); submit p99 "
                f"{busy['p99_ms']:.2f} ms, backlog left after the last submit "
                f"{busy['backlog_left_after_last_submit']}/{busy['backlog']}; 10-step p99 "
                f"{f['ten']['to_result']['p99_ms']:.2f} ms; floor {f['floor']['median_ms']:.3f} ms"
            )
    return lines


def report(results: list[dict[str, Any]], info: dict[str, Any], sizes: dict[str, Any]) -> str:
    out = [
        "Side by side: this engine and DBOS Transact on one PostgreSQL server (issue 10)",
        f"date {info['date']}; machine: {info['cores']} cores; load average (1/5/15 min) at start "
        f"{info['load_start']}, at end {info['load_end']}; at start {info['speed']}, at end {info['speed_end']}",
        f"PostgreSQL {info['pg']['version']}: fsync={info['pg']['fsync']}, "
        f"synchronous_commit={info['pg']['synchronous_commit']}, "
        f"wal_sync_method={info['pg']['wal_sync_method']}; DBOS {info['dbos']}",
        f"sizes: {sizes['ten']} runs of each for the medians, {sizes['throughput']} x 10-step runs for "
        f"steps/s, {sizes['submits']} submits over a backlog of {sizes['backlog']}, {sizes['send']} "
        f"sends, {sizes['stats']} runs per statistics window; DBOS queue polling {sizes['dbos_poll']} s; "
        f"{len(results)} round(s), DBOS then project in each",
    ]
    if info.get("note"):
        out.append(info["note"])
    floors_all = []
    for i, round_ in enumerate(results, 1):
        floors = [round_[s]["floor"] for s in SYSTEMS if round_.get(s)]
        floors_all += floors
        heads = {s: headline(round_[s]) if round_.get(s) else None for s in SYSTEMS}
        out += ["", headline_table(f"Round {i}", heads, floor_cells(floors))]
    medians = {}
    for s in SYSTEMS:
        per_round = [headline(r[s]) for r in results if r.get(s)]
        medians[s] = {k: _median([h[k] for h in per_round]) for k, *_ in ROWS} if per_round else None
    out += ["", headline_table(f"Median of {len(results)} round(s)", medians, floor_cells(floors_all))]
    steps = {}
    for s in SYSTEMS:
        per_round = [per_step(r[s], s) for r in results if r.get(s)]
        steps[s] = {k: _median([p[k] for p in per_round]) for k, *_ in PG_ROWS} if per_round else None
    out += ["", pg_table(f"Per step on PostgreSQL, median of {len(results)} round(s)", steps), ""]
    for s in SYSTEMS:
        if results[-1].get(s):
            out.append(f"{s}, rows written per 10-step run (last round): {tables_written(results[-1][s])}")
    for s in SYSTEMS:
        if results[-1].get(s):
            out.append(f"{s}, WAL bytes per step by relation (last round): {wal_by_relation(results[-1][s])}")
    out += [
        "index insertions = sum over tables of (inserted + updated - HOT-updated rows) x the "
        "table's indexes (PostgreSQL 15 counts no index insertions itself; an upper bound where "
        "an index is partial).",
        "",
        *detail_lines(results),
    ]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = dict(QUICK if args.quick else FULL)
    if args.dbos_poll is not None:
        sizes["dbos_poll"] = args.dbos_poll
    info: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "load_start": _loadavg(),
        "speed": reference_ms_text(),
        "pg": _sbs_pg.server_info(f"{PG_SERVER_URL}/postgres"),
    }
    with_dbos = not args.no_dbos
    if args.no_dbos:
        info["dbos"] = "not measured (--no-dbos)"
    elif importlib.util.find_spec("dbos") is None:
        with_dbos = False
        info["dbos"] = "not installed"
        info["note"] = (
            "DBOS figures skipped: the `dbos` package is not installed "
            "(.venv/bin/pip install -r requirements-bench-dbos.txt)."
        )
        progress(info["note"])
    else:
        from importlib.metadata import version

        info["dbos"] = version("dbos")
    BENCH_VAR.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sbs-") as tmp:
        for i in range(1, args.rounds + 1):
            round_: dict[str, Any] = {}
            if with_dbos:
                progress(f"round {i}/{args.rounds}: DBOS (load {_loadavg()})")
                round_["dbos"] = run_dbos(sizes, Path(tmp))
            progress(f"round {i}/{args.rounds}: project (load {_loadavg()})")
            paced = round_["dbos"]["throughput"]["steps_per_s"] if "dbos" in round_ else PACED_DEFAULT
            round_["project"] = run_project({**sizes, "paced_steps_per_s": paced}, Path(tmp))
            results.append(round_)
    info["load_end"] = _loadavg()
    info["speed_end"] = reference_ms_text()
    print(report(results, info, sizes))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps({"info": info, "sizes": sizes, "rounds": results}, indent=2, default=str)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
