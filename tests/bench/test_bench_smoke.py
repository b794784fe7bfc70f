"""The engine benchmark runs end to end (a small --quick run on SQLite) and prints every figure.
No timing is asserted: figures come from `bench/engine.py`, never from tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench._report import LABELS

ROOT = Path(__file__).resolve().parents[2]


def on_postgresql(what: str) -> pytest.MarkDecorator:
    """Skip unless the suite runs on PostgreSQL (`what`: the bench and what it measures there)."""
    return pytest.mark.skipif(
        not os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://")),
        reason=f"{what} (run with the PostgreSQL suite)",
    )


def run_bench(tmp_path: Path, script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `bench/<script>` on SQLite with its files under `tmp_path`; it must exit 0."""
    env = {**os.environ, "BENCH_VAR": str(tmp_path)}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, f"bench/{script}", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=580,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@pytest.mark.timeout(600)
def test_engine_bench__quick_sqlite_run_prints_every_figure(tmp_path):
    done = run_bench(
        tmp_path, "engine.py", "--quick", "--db", "sqlite", "--json", str(tmp_path / "figures.json")
    )
    missing = [label for label in LABELS if label not in done.stdout]
    assert not missing, f"labels not printed: {missing}\n{done.stdout}"
    assert "Targets of issue 2" in done.stdout
    assert (tmp_path / "figures.json").exists()


@pytest.mark.timeout(600)
def test_web_load_bench__small_sqlite_run_prints_its_table(tmp_path):
    done = run_bench(
        tmp_path,
        "web_load.py",
        *("--db", "sqlite", "--rates", "10", "--duration", "1", "--warmup", "0", "--floor-duration", "1"),
        *("--server", "uvicorn", "--no-runner", "--json", str(tmp_path / "web.json")),
    )
    assert "sustainable rate" in done.stdout and "target:" in done.stdout, done.stdout
    assert "bare Django JSON view" in done.stdout and "drain by one runner" in done.stdout, done.stdout
    assert "reference workload" in done.stdout, done.stdout
    figures = json.loads((tmp_path / "web.json").read_text())
    [rate] = figures["rates"]
    assert rate["sent"] == 10 and rate["ok"] + sum(rate["errors"].values()) == 10
    assert figures["floor"]["sent"] == 10 and figures["cpu"]["floor_ms"] > 0
    assert figures["drain"]["runs"] == figures["drain"]["published"] >= rate["ok"]


@pytest.mark.timeout(600)
def test_takeover_bench__two_sqlite_rounds_print_the_figures(tmp_path):
    done = run_bench(tmp_path, "takeover.py", "--rounds", "2", "--json", str(tmp_path / "takeover.json"))
    assert "restart -> the step starting again" in done.stdout and "target:" in done.stdout, done.stdout
    figures = json.loads((tmp_path / "takeover.json").read_text())
    assert figures["rounds"] == 2 and figures["restart_to_step_s"]["max"] < figures["lease_s"]


@pytest.mark.timeout(600)
def test_claims_bench__small_sqlite_run_prints_every_situation(tmp_path):
    done = run_bench(
        tmp_path,
        "claims.py",
        *("--db", "sqlite", "--held", "300", "--samples", "10", "--json", str(tmp_path / "claims.json")),
    )
    for situation in (
        "ungrouped, nothing waiting", "grouped, 300 held back", "grouped, finding nothing",
        "ungrouped, 300 due of 3 workflows", "the claim before",
    ):  # fmt: skip
        assert situation in done.stdout, done.stdout
    figures = json.loads((tmp_path / "claims.json").read_text())["figures"]["sqlite"]
    once = figures.pop("set aside once")
    assert once["claims"] >= 1
    assert len(figures) == 9 and all(f["n"] == 10 for f in figures.values())


@pytest.mark.timeout(600)
@on_postgresql("bench/hot_path.py measures PostgreSQL's hot path")
def test_hot_path_bench__quick_run_prints_each_change_on_and_off(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_PG_DATABASE", "bench_hot_path_smoke")  # never the one people bench in
    done = run_bench(tmp_path, "hot_path.py", "--quick")
    for label in ("a step's commit", "a run read", "a 10-step history read", "thread, group queue"):
        assert label in done.stdout, done.stdout
    ways = ("| async connection, group commit |", "| async connection alone |", "| threads, group commit |")
    rows = [line for line in done.stdout.splitlines() if line.startswith(ways)]
    assert len(rows) == 3, done.stdout
    assert "per statement" in done.stdout
    driver = [
        line
        for line in done.stdout.splitlines()
        if line.startswith(("| commit waits", "| synchronous_commit"))
    ]
    assert len(driver) == 2 and "bare libpq from the loop" in done.stdout, done.stdout
    assert "reference workload" in done.stdout, done.stdout


@pytest.mark.timeout(600)
@on_postgresql("bench/send_path.py measures PostgreSQL's send path")
def test_send_path_bench__a_few_sends_print_every_phase(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_PG_DATABASE", "bench_send_path_smoke")  # never the one people bench in
    done = run_bench(tmp_path, "send_path.py", "--sends", "3")
    for phase in (
        "send returns",
        "NOTIFY reaches the runner",
        "claim, from the event loop",
        "first step starts",
    ):
        assert f"| {phase} |" in done.stdout, done.stdout
    assert "0 of 3 sends lacked a mark" in done.stdout, done.stdout


@pytest.mark.timeout(600)
def test_side_by_side_sqlite_bench__one_small_round_prints_its_table(tmp_path):
    done = run_bench(
        tmp_path, "side_by_side_sqlite.py", "--rounds", "1", "--runs", "3", "--no-dbos", "--thread-commits"
    )
    for row in (
        "floor: one committed single-row insert",
        "durable overhead per step",
        "per step / its own floor",
    ):
        assert row in done.stdout, done.stdout
    assert "| figure | project | project, FULL | project, thread | project, FULL, thread |" in done.stdout, (
        done.stdout
    )
    assert "project: journal_mode=wal, synchronous=NORMAL" in done.stdout, done.stdout
    assert "project, FULL: journal_mode=wal, synchronous=FULL" in done.stdout, done.stdout
    assert "reference workload" in done.stdout, done.stdout


@pytest.mark.timeout(300)
@on_postgresql("bench/commit_wait.py measures PostgreSQL's commits")
def test_commit_wait_bench__quick_run_prints_a_row_per_machine_state(tmp_path, monkeypatch):
    monkeypatch.setenv(
        "BENCH_COMMIT_WAIT_DATABASE", "bench_commit_wait_smoke"
    )  # never the one people bench in
    done = run_bench(tmp_path, "commit_wait.py", "--quick", "--spinners", "2", "--nice", "0,5")
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ") and " ms | " in line]
    assert [row.split(" | ")[0] for row in rows] == [
        "| idle",
        "| 2 spinning processes at nice 0",
        "| 2 spinning processes at nice 5",
    ], done.stdout


@pytest.mark.timeout(300)
@on_postgresql("bench/run_ids.py measures PostgreSQL's WAL")
def test_run_ids_bench__a_small_history_prints_both_ways(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RUN_IDS_DATABASE", "bench_run_ids_smoke")  # never the one people bench in
    done = run_bench(tmp_path, "run_ids.py", "--runs", "200", "--window", "3", "--rounds", "1")
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| random", "| time-ordered"))]
    assert len(rows) == 2 and all(" ms |" in row for row in rows), done.stdout


@pytest.mark.timeout(300)
@on_postgresql("bench/bulk.py measures a bulk cancel on PostgreSQL")
def test_bulk_bench__a_small_bulk_cancel_prints_every_phase(tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_BULK_DATABASE", "bench_bulk_smoke")  # never the one people bench in
    done = run_bench(tmp_path, "bulk.py", "--runs", "300", "--rate", "5", "--phase", "2", "--batch", "50")
    assert "operation executed" in done.stdout and "300 done, 0 skipped, 0 failed" in done.stdout, done.stdout
    for phase in ("before", "while the operation executes", "while runs end cancelled", "after"):
        assert f"  {phase}" in done.stdout, done.stdout


@pytest.mark.timeout(600)
def test_job_cpu_bench__a_few_jobs_print_both_modes_split(tmp_path):
    done = run_bench(tmp_path, "job_cpu.py", "--jobs", "2", "--warmup", "1", "--top", "3")
    rows = [
        line.split() for line in done.stdout.splitlines() if line.startswith(("  per-step ", "  shared "))
    ]
    assert [row[0] for row in rows] == ["per-step", "shared"], done.stdout
    assert all(len(row) == 9 and float(row[1]) > 0 for row in rows), done.stdout
    assert done.stdout.count("the costliest functions of the loop thread") == 2
    assert "reference workload" in done.stdout, done.stdout


def test_streams_bench__a_small_sqlite_run_prints_a_row_per_pace(tmp_path):
    done = run_bench(tmp_path, "streams.py", "--db", "sqlite", "--chunks", "40")
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("sqlite ")]
    assert [row[3] for row in rows] == ["0", "1", "5"], done.stdout
    assert all(int(row[5]) >= 1 for row in rows), done.stdout  # commits that carried chunks
