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


def postgres_cpu_seconds() -> float | None:
    """CPU seconds (user + system) the PostgreSQL server's processes on this machine have used so
    far: the difference over a drain, divided by its steps, is the database's CPU per step (the
    other half of a CPU-bound drain on a machine it shares with the workers). Exited backends'
    time is not counted, so a window's connections must outlive it. None when no server runs
    here (or /proc cannot be read)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total, found = 0.0, False
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as f:
                if f.read().strip() not in ("postgres", "postmaster"):
                    continue
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        total += (int(fields[11]) + int(fields[12])) / ticks
        found = True
    return total if found else None
