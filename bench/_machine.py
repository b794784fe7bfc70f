"""What the machine did over a window of a benchmark: how busy its CPUs were (`/proc/stat`) and
how busy the disk under PostgreSQL's data directory was, with how many cache flushes it served
and how long one took (`/proc/diskstats`, Linux 5.5+ for the flush fields).

Why: a commit that waits for its WAL flush can wait for the disk or for a CPU (the backend that
holds the WAL write lock, woken from its fsync, must be scheduled again before anyone waiting
behind it goes on). Reading both over the same window as the timings tells the two apart. Linux
only, and the disk only when PostgreSQL runs on this machine; otherwise the figures are None.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Snapshot:
    at: float
    cpu: tuple[int, int] | None  # (busy jiffies, all jiffies) over every CPU
    disk: list[int] | None  # the device's /proc/diskstats fields after its name


def _cpu() -> tuple[int, int] | None:
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # user..steal; guest time is already in user
    return total - idle, total


def _disk(device: tuple[int, int] | None) -> list[int] | None:
    if device is None:
        return None
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                parts = line.split()
                if (int(parts[0]), int(parts[1])) == device:
                    return [int(v) for v in parts[3:]]
    except (OSError, ValueError):
        return None
    return None


def data_device(data_directory: str | None) -> tuple[int, int] | None:
    """(major, minor) of the block device holding `data_directory`, when it is on this machine."""
    if not data_directory:
        return None
    try:
        st = os.stat(data_directory)
    except OSError:
        return None
    return os.major(st.st_dev), os.minor(st.st_dev)


def server_data_device(conn: Any) -> tuple[int, int] | None:
    """The device under the data directory of the PostgreSQL server a psycopg connection talks
    to (reading it takes a superuser or pg_read_all_settings), when that is this machine."""
    import psycopg

    try:
        row = conn.execute("SHOW data_directory").fetchone()
    except psycopg.Error:
        return None
    return data_device(None if row is None else str(row[0]))


def snapshot(device: tuple[int, int] | None) -> Snapshot:
    return Snapshot(time.monotonic(), _cpu(), _disk(device))


def window(before: Snapshot, after: Snapshot) -> dict[str, Any]:
    """CPU busy %, and the disk's busy %, writes/s, flushes/s and mean ms per flush, between two
    snapshots (None where not known)."""
    seconds = max(after.at - before.at, 1e-9)
    out: dict[str, Any] = {"seconds": seconds, "cpu_busy_pct": None, "disk": None}
    if before.cpu and after.cpu and after.cpu[1] > before.cpu[1]:
        out["cpu_busy_pct"] = 100 * (after.cpu[0] - before.cpu[0]) / (after.cpu[1] - before.cpu[1])
    if before.disk and after.disk:
        d = [b - a for a, b in zip(before.disk, after.disk, strict=False)]
        flushes = d[15] if len(d) > 16 else None  # fields 15, 16: flushes completed, ms flushing
        out["disk"] = {
            "busy_pct": d[9] / 10 / seconds,  # ms doing I/O per second of wall time
            "writes_per_s": d[4] / seconds,
            "ms_per_write": d[7] / d[4] if d[4] else None,
            "flushes_per_s": None if flushes is None else flushes / seconds,
            "ms_per_flush": d[16] / flushes if flushes else None,
        }
    return out


# --- CPU of process trees -------------------------------------------------------------------------

TICKS = os.sysconf("SC_CLK_TCK")


def processes() -> dict[int, tuple[int, int]]:
    """Every process now: pid -> (parent pid, utime+stime+cutime+cstime in ticks)."""
    table = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        table[int(entry.name)] = (int(fields[1]), sum(int(v) for v in fields[11:15]))
    return table


def tree_cpu(roots: Iterable[int], table: dict[int, tuple[int, int]] | None = None) -> float:
    """CPU seconds of `roots` and their live descendants, with what their reaped children used
    (cutime+cstime): a backend that exits within a window still counts, through its parent."""
    table = processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _ticks) in table.items():
        children.setdefault(ppid, []).append(pid)
    ticks, todo = 0, [pid for pid in roots if pid in table]
    while todo:
        pid = todo.pop()
        ticks += table[pid][1]
        todo += children.get(pid, [])
    return ticks / TICKS


def postmaster_pid(url: str) -> int | None:
    """The pid of the PostgreSQL server `url` talks to, when it runs on this machine (from its
    data directory's postmaster.pid; reading the directory takes a superuser or
    pg_read_all_settings); None otherwise."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        with open(os.path.join(str(row[0]), "postmaster.pid")) as f:
            return int(f.readline())
    except (psycopg.Error, OSError, ValueError, TypeError):
        return None


def postgres_cpu_seconds(postmaster: int | None) -> float | None:
    """CPU seconds the server's processes (the postmaster's tree) have used so far: over a drain,
    divided by its steps, the database's CPU per step, the other half of a CPU-bound drain on a
    machine it shares with the workers. None when the server is not on this machine."""
    return None if postmaster is None else tree_cpu([postmaster])


def cpu_ms_per_step(before: float | None, after: float | None, steps: int) -> float | None:
    """CPU ms per step between two readings (None when either is missing)."""
    return None if before is None or after is None else (after - before) * 1000 / steps
