"""Real `runworkflows` processes against the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support import test_database_url

ROOT = Path(__file__).resolve().parents[2]


class Runners:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "DATABASE_URL": test_database_url(),
            "WORKFLOWS_REGISTRIES": "tests.acceptance.flows.registry",
            "ACCEPTANCE_DIR": str(self.workdir),
            "WORKFLOWS_LEASE_SECONDS": "2",
            "WORKFLOWS_HEARTBEAT_SECONDS": "0.5",
            "LOG_LEVEL": "WARNING",
        }

    def start(self, *args: str) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "manage.py", "runworkflows", *args],
            cwd=ROOT,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def ledger(self) -> Counter:
        path = self.workdir / "ledger.log"
        return Counter(path.read_text().splitlines()) if path.exists() else Counter()

    def stop_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(10)


@pytest.fixture
def runners(transactional_db, tmp_path):
    group = Runners(tmp_path)
    yield group
    group.stop_all()
