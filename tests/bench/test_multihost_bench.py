"""bench/multihost.py runs end to end (tiny sizes: --quick's hosts 1,2 and RTT 0,20 ms, 20 runs of
3 steps) and prints every figure's label; no timing is asserted. The PostgreSQL pass only, and only
as root: the bench makes network namespaces and a private PostgreSQL cluster of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import multihost
from bench._hosts import why_not
from bench.multihost import LABELS
from tests.bench.test_bench_smoke import on_postgresql

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
@on_postgresql("bench/multihost.py measures runners against PostgreSQL")
def test_multihost_bench__tiny_quick_run_prints_every_figure(tmp_path):
    reason = why_not()
    if reason:
        pytest.skip(f"bench/multihost.py {reason}")
    done = subprocess.run(
        [sys.executable, "bench/multihost.py", "--quick", "--runs", "20", "--steps", "3",
         "--json", str(tmp_path / "multihost.json")],
        cwd=ROOT, env={**os.environ, "BENCH_VAR": str(tmp_path)}, capture_output=True, text=True, timeout=280,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    for label in (*LABELS, "cores: 2" if os.cpu_count() == 2 else "cores:", "load average at start",
                  "load average at end", "fsync=on", "UTC", "per-step CPU figures"):  # fmt: skip
        assert label in done.stdout, done.stdout
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| 1 |", "| 2 |"))]
    assert len(rows) == 4, done.stdout
    figures = json.loads((tmp_path / "multihost.json").read_text())
    assert [(c["hosts"], c["rtt_ms"], c["steps"]) for c in figures["configurations"]] == [
        (1, 0, 60), (2, 0, 60), (1, 20, 60), (2, 20, 60),
    ]  # fmt: skip


def test_multihost_bench__says_why_and_exits_2_when_not_root(monkeypatch, capsys):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    assert multihost.main(["--quick"]) == 2
    assert "needs root" in capsys.readouterr().err
