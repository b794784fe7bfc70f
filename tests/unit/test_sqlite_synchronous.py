"""SQLITE_SYNCHRONOUS: how long a commit on the embedded SQLite database waits for the disk, as a
process started with it sets its connections (NORMAL by default; FULL survives a power loss; any
other value stops the process at start with a clear error)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (
    "import django; django.setup(); from django.db import connection;"
    "c = connection.cursor(); c.execute('PRAGMA synchronous'); print(c.fetchone()[0]);"
    "c.execute('PRAGMA journal_mode'); print(c.fetchone()[0])"
)


def _start(tmp_path: Path, value: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SQLITE_SYNCHRONOUS"}
    env |= {
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
    }
    if value is not None:
        env["SQLITE_SYNCHRONOUS"] = value
    return subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("value, level", [(None, "1"), ("normal", "1"), ("FULL", "2")])
def test_the_connections_wait_as_asked(tmp_path, value, level):
    done = _start(tmp_path, value)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [level, "wal"]  # 1: NORMAL, 2: FULL


def test_another_value_stops_the_process_with_a_clear_error(tmp_path):
    done = _start(tmp_path, "OFF")
    assert done.returncode != 0
    assert "SQLITE_SYNCHRONOUS must be NORMAL or FULL, not 'OFF'" in done.stderr
