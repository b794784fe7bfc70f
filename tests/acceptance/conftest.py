"""Real `runworkflows` processes against the test database."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from tests.support import test_database_url, wait_for

ROOT = Path(__file__).resolve().parents[2]


class Output:
    """A runner process's output (its log: stderr merged into stdout), read line by line as it
    comes: the pipe never fills (a runner blocked writing its log would stop heartbeating), and
    a failing test can show what the runners said."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, args=(proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def has(self, text: str) -> bool:
        return any(text in line for line in list(self.lines))

    def text(self) -> str:
        """All of it, once the process has exited (read to the end of the pipe)."""
        self._reader.join(30)
        return "".join(self.lines)


class Runners:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen] = []
        self.outputs: dict[int, Output] = {}  # by pid

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
        self.outputs[proc.pid] = Output(proc)
        return proc

    def output(self, proc: subprocess.Popen) -> Output:
        return self.outputs[proc.pid]

    def wait_up(self, proc: subprocess.Popen) -> None:
        """Until `proc` has written its presence row, after its loop began handling SIGTERM: a
        runner still starting when the others did all the work would be ended by the signal
        itself (returncode -15), not stop gracefully."""
        from workflows.models import RunnerPresence

        wait_for(
            lambda: RunnerPresence.objects.filter(pid=proc.pid).exists() or proc.poll() is not None,
            timeout=60,
            what=f"runner {proc.pid} to be up\n{self.said()}",
        )

    def said(self) -> str:
        """Every runner's output so far, for a failing assertion's message."""
        return "\n".join(f"--- runner {pid} ---\n{''.join(out.lines)}" for pid, out in self.outputs.items())

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


@pytest.fixture
def stream_runners(runners, monkeypatch):
    """Runners serving the streaming workflows of tests/acceptance/stream_flows.py."""
    monkeypatch.setattr(
        runners,
        "env",
        lambda env=runners.env: {**env(), "WORKFLOWS_REGISTRIES": "tests.acceptance.stream_flows.registry"},
    )
    return runners
