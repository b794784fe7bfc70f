"""Who a runner process is, and whether another runner's process is still alive: what a same-host
takeover rests on. A runner may end a dead predecessor's leases at once instead of waiting them
out only when it can prove that process gone: the same host name, the same kernel boot and PID
namespace (so the pid means the same process to both), and the pid gone, a zombie, or reused by a
process that started later (the kernel's start time differs). Anything it cannot prove counts as
alive: the leases then lapse as before. Linux's /proc gives the proof; where there is no /proc
(`machine()` is empty) nothing is ever taken over.
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from pathlib import Path

from ..core.records import RunnerRecord

PROC = Path("/proc")


def hostname() -> str:
    return socket.gethostname()


def machine() -> str:
    """This kernel boot and PID namespace ("" when unknown): two runners compare pids only when
    theirs are equal. A container restarted gets a new PID namespace, so it takes nothing over."""
    try:
        boot = (PROC / "sys/kernel/random/boot_id").read_text().strip()
        namespace = os.readlink(PROC / "self/ns/pid")
    except OSError:
        return ""
    return f"{boot}/{namespace}"


def _stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of `pid` from /proc, None when it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the name may hold spaces and parentheses
    return fields[0], fields[19]  # fields 3 (state) and 22 (starttime) of proc(5)


def process_start(pid: int) -> str:
    """The kernel's start time of `pid` ("" when unknown): the same value means the same process."""
    try:
        found = _stat(pid)
    except (OSError, ValueError, IndexError):
        return ""
    return found[1] if found else ""


def process_gone(pid: int, start: str) -> bool:
    """True only when the process `pid` that started at `start` (process_start) surely exited.
    Call it for a pid of this host's PID namespace only. Our own pid counts as gone only when it
    started at another time (a predecessor had it): two runners of one process are both alive."""
    if pid <= 0:
        return False
    if PROC.joinpath("self").exists():
        try:
            found = _stat(pid)
        except (OSError, ValueError, IndexError):
            return False
        if found is None:
            return True
        state, started = found
        return state in ("Z", "X") or (bool(start) and started != start)  # a zombie, or a new process
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # PermissionError: a process of another user has it
        return False
    return False


def describe_self(
    *,
    owner: str,
    workflows: dict[str, list[str]],
    lease_seconds: float,
    concurrency: int,
    now: dt.datetime,
    clock_offset: float | None = None,
) -> RunnerRecord:
    """This process's presence record."""
    pid = os.getpid()
    return RunnerRecord(
        owner=owner,
        host=hostname(),
        pid=pid,
        machine=machine(),
        process_start=process_start(pid),
        started_at=now,
        last_seen=now,
        lease_seconds=lease_seconds,
        concurrency=concurrency,
        workflows=workflows,
        clock_offset=clock_offset,
    )


def dead_predecessors(me: RunnerRecord, runners: list[RunnerRecord]) -> list[RunnerRecord]:
    """Runners of this host (same name, boot and PID namespace) whose process has exited:
    their runs can be taken over now. Never another host's, never a live process's."""
    return [
        r
        for r in runners
        if r.owner != me.owner
        and r.host == me.host
        and me.machine
        and r.machine == me.machine
        and process_gone(r.pid, r.process_start)
    ]


def serving(runners: list[RunnerRecord], now: dt.datetime) -> set[str]:
    """The workflows some live runner knows."""
    return {name for r in runners if r.alive(now) for name in r.workflows}


def knower_of(
    workflow: str, version: str, mine: dict[str, list[str]], runners: list[RunnerRecord], now: dt.datetime
) -> RunnerRecord | None:
    """During a rolling deploy: a live runner that registers `version` of `workflow` when this
    one does not (a run started by newer code), so this runner leaves the run to it instead of
    executing it with its own latest definition, which could diverge from the run's history.
    None when this runner knows the version, or no live runner does (a retired version: the
    latest definition executes it, as always)."""
    if not version or version in mine.get(workflow, ()):
        return None
    return next((r for r in runners if r.alive(now) and version in r.workflows.get(workflow, ())), None)
