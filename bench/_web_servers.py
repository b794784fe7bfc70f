"""The ASGI servers bench/web_load.py compares, each as ONE process on 127.0.0.1, and the CPU a
server process (and any child it forks: granian's worker) has used."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

SERVERS = ("daphne", "uvicorn", "granian")
TICKS = os.sysconf("SC_CLK_TCK")
# The servers' keep-alive: idle connections closed after this; the bench's client lets its own
# idle connections go sooner (KEEPALIVE_CLIENT_S), or it may reuse one the server is closing.
KEEPALIVE_SERVER_S = 5
KEEPALIVE_CLIENT_S = 2.0


def server_argv(server: str, app: str, port: int) -> list[str]:
    """The command that serves `app` ("module:attribute") with `server`, one process (granian:
    `asginl`, ASGI without the lifespan protocol, which Channels' router does not take)."""
    python = sys.executable
    if server == "daphne":
        return [python, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), app]
    if server == "uvicorn":
        return [
            python, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(port),
            "--loop", "uvloop", "--http", "httptools", "--lifespan", "off", "--no-access-log",
            "--timeout-keep-alive", str(KEEPALIVE_SERVER_S), "--log-level", "warning",
        ]  # fmt: skip
    if server == "granian":
        return [
            python, "-m", "granian", "--interface", "asginl", "--host", "127.0.0.1", "--port", str(port),
            "--workers", "1", "--loop", "uvloop", "--no-ws" if app.startswith("bench.") else "--ws",
            "--log-level", "warning", app,
        ]  # fmt: skip
    raise ValueError(f"unknown server {server!r}; one of {', '.join(SERVERS)}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and its descendants alive now (granian serves from a worker it
    forks; daphne and uvicorn from the process itself)."""
    total = 0.0
    for one in [pid, *_descendants(pid)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        total += (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
    return total


def _descendants(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            found += [child, *_descendants(child)]
    return found
