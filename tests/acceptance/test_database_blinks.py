"""The database blinks while runs step: every client connection killed again and again
(`pg_terminate_backend`), the server restarted under load (`pg_ctl restart -m fast`). No run
fails for it, every run ends as it would have, and each external side effect happens once.

Real runner processes against a private PostgreSQL cluster of the test's own (tests/pgcluster.py),
so the shared server is never touched. Runs in the PostgreSQL pass of the suite.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from django.db import connection

from tests import pgcluster
from tests.support import wait_for

ROOT = Path(__file__).resolve().parents[2]
RUNS = 40
STEPS = ("extract", "enrich", "summarize", "review", "publish")

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql" or not pgcluster.available(),
    reason="needs PostgreSQL's initdb (the suite's PostgreSQL pass) for a private cluster",
)


class Blinking:
    """A private cluster, the app's tables in it, runner processes against it and their ledger."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.cluster = pgcluster.PrivateCluster(max_connections=50).start()
        self.procs: list[subprocess.Popen] = []
        self.manage("migrate", "--verbosity", "0")

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": self.cluster.url(),
            "WORKFLOWS_REGISTRIES": "tests.acceptance.flows.registry",
            "ACCEPTANCE_DIR": str(self.workdir),
            "WORKFLOWS_LEASE_SECONDS": "3",
            "WORKFLOWS_HEARTBEAT_SECONDS": "0.5",
            "LOG_LEVEL": "WARNING",
        }

    def manage(self, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=self.env(), capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    def start_runs(self, count: int) -> None:
        code = (
            "from tests.acceptance.flows import registry\n"
            "client = registry.client('blink')\n"
            f"for i in range({count}): client.get_or_create([f'r{{i:03d}}'])\n"
        )
        self.manage("shell", "-c", code)

    def start_runner(self, n: int) -> None:
        log = open(self.workdir / f"runner-{n}.log", "w")  # a file: a pipe could fill and block it
        self.procs.append(
            subprocess.Popen(
                [sys.executable, "manage.py", "runworkflows", "--concurrency", "8"],
                cwd=ROOT,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )

    def ledger(self) -> Counter:
        path = self.workdir / "ledger.log"
        return Counter(path.read_text().splitlines()) if path.exists() else Counter()

    def steps_run(self) -> int:
        return sum(self.ledger().values())

    def statuses(self) -> Counter:
        return Counter(dict(self.cluster.query("SELECT status, count(*) FROM workflows_run GROUP BY status")))

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self.cluster.destroy()


@pytest.fixture
def blinking(tmp_path):
    setup = Blinking(tmp_path)
    yield setup
    setup.close()


def _after_progress(blinking: Blinking, steps: int, what: str) -> None:
    """Wait until the runners have run `steps` more step bodies (so each blink hits work in flight)."""
    target = blinking.steps_run() + steps
    wait_for(lambda: blinking.steps_run() >= target or blinking.statuses()["completed"] == RUNS, 60, what)


def _assert_every_run_ended_as_without_blinks(blinking: Blinking) -> None:
    wait_for(lambda: blinking.statuses()["completed"] == RUNS, 120, f"all {RUNS} runs to complete")
    assert blinking.statuses() == Counter({"completed": RUNS})  # none failed, none stuck
    rows = blinking.cluster.query(
        "SELECT r.key, r.result, r.error, r.state->>'stage' FROM workflows_run r ORDER BY r.key"
    )
    assert all(
        result == "published" and error is None and stage == "published" for _k, result, error, stage in rows
    )
    recorded = blinking.cluster.query(
        "SELECT name, count(*), sum(attempts) FROM workflows_entry WHERE NOT superseded GROUP BY name ORDER BY name"
    )
    assert recorded == sorted((name, RUNS, RUNS) for name in STEPS)  # each step recorded once, one attempt
    assert not blinking.cluster.query("SELECT 1 FROM workflows_attempt WHERE outcome <> 'ok'")
    ledger = blinking.ledger()
    posts = [line for line in ledger if line.endswith(" post-created")]
    assert len(posts) == RUNS and all(ledger[line] == 1 for line in posts)  # one post per run, ever
    assert (blinking.workdir / "posts").is_dir() and len(list((blinking.workdir / "posts").iterdir())) == RUNS


def test_connections_killed_again_and_again__no_run_fails_each_post_once(blinking):
    blinking.start_runs(RUNS)
    blinking.start_runner(1)
    blinking.start_runner(2)
    killed = 0
    for n in range(10):
        _after_progress(blinking, 8, f"progress before kill {n + 1}")
        killed += blinking.cluster.terminate_backends()
    assert killed >= 10  # the blinks did cut the runners' connections
    _assert_every_run_ended_as_without_blinks(blinking)
    assert all(proc.poll() is None for proc in blinking.procs)  # the runners rode it out


def test_server_restarted_under_load__no_run_fails_each_post_once(blinking):
    blinking.start_runs(RUNS)
    blinking.start_runner(1)
    blinking.start_runner(2)
    for n in range(2):
        _after_progress(blinking, 25, f"progress before restart {n + 1}")
        blinking.cluster.restart("fast")
    _assert_every_run_ended_as_without_blinks(blinking)
    assert all(proc.poll() is None for proc in blinking.procs)
