"""The bed's control process: starts runs and makes API keys in the private cluster.

The test process's own Django talks to pytest-django's test database on the shared server, and
the engine's client writes through Django's default connection, so the bed keeps one process of
its own on the cluster (on 127.0.0.1) and sends it one JSON command per line:

    {"op": "start", "workflow": "chain", "keys": [["r01"], ...], "state": {...}}  -> {"ids": [...]}
    {"op": "apikey", "name": "web"}                                              -> {"key": "wf_..."}
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


class Control:
    """A client of `python -m tests.multihost.control` (started with the env given)."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self._log = open(log, "w")  # closed in stop()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.multihost.control"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
        )
        self._lock = threading.Lock()

    def ask(self, **command: Any) -> dict[str, Any]:
        with self._lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(json.dumps(command) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        if not line:
            raise AssertionError(f"control process died: {Path(self._log.name).read_text()[-3000:]}")
        answer = json.loads(line)
        if "error" in answer:
            raise AssertionError(f"control {command['op']}: {answer['error']}")
        return answer

    def start(self, workflow: str, keys: list[list[str]], state: dict[str, Any] | None = None) -> list[str]:
        return self.ask(op="start", workflow=workflow, keys=keys, state=state)["ids"]

    def stop(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._log.close()


def _serve() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from tests.multihost.flows import registry
    from workflows.http.auth import create_api_key

    for line in sys.stdin:
        command = json.loads(line)
        try:
            if command["op"] == "start":
                client = registry.client(command["workflow"])
                handles = [client.get_or_create(key, state=command.get("state")) for key in command["keys"]]
                answer: dict[str, Any] = {"ids": [h.run_id for h in handles]}
            elif command["op"] == "apikey":
                answer = {"key": create_api_key(command["name"])[1]}
            else:
                answer = {"error": f"unknown op {command['op']!r}"}
        except Exception as exc:  # reported to the test, which fails with it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    _serve()
