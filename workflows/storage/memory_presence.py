"""Runners' presence in the in-memory store, with the Django store's semantics (see
`storage.django.presence`): mixed into MemoryStore, over its runs and its lock."""

from __future__ import annotations

import copy
import datetime as dt
import threading
from collections import Counter
from dataclasses import replace

from ..core.records import LIVE, RunnerRecord, RunRecord, RunStatus


class MemoryPresence:
    runs: dict[str, RunRecord]
    runners: dict[str, RunnerRecord]
    _lock: threading.RLock

    def register_runner(self, runner: RunnerRecord) -> None:
        with self._lock:
            self.runners[runner.owner] = replace(runner, workflows=copy.deepcopy(runner.workflows))

    def touch_runner(self, owner: str, *, now: dt.datetime, clock_offset: float | None = None) -> bool:
        with self._lock:
            if owner not in self.runners:
                return False
            runner = self.runners[owner]
            offset = runner.clock_offset if clock_offset is None else clock_offset
            self.runners[owner] = replace(runner, last_seen=now, clock_offset=offset)
            return True

    def unregister_runner(self, owner: str) -> None:
        with self._lock:
            self.runners.pop(owner, None)

    def list_runners(self) -> list[RunnerRecord]:
        with self._lock:
            return sorted(self.runners.values(), key=lambda r: (r.started_at, r.owner))

    def forget_runners(self, *, seen_before: dt.datetime) -> int:
        with self._lock:
            gone = [owner for owner, r in self.runners.items() if r.last_seen < seen_before]
            for owner in gone:
                del self.runners[owner]
            return len(gone)

    def expire_leases(self, owner: str, *, lapsed_at: dt.datetime, now: dt.datetime) -> int:
        lapsed_at = min(lapsed_at, now)
        with self._lock:
            expired = 0
            for run_id, run in list(self.runs.items()):
                if run.lease_owner != owner or run.status != RunStatus.RUNNING:
                    continue
                if run.wake_at is not None and run.wake_at > lapsed_at:
                    self.runs[run_id] = replace(run, wake_at=lapsed_at)
                    expired += 1
            return expired

    def due_elsewhere(self, workflows: list[str], *, now: dt.datetime, limit: int = 50) -> dict[str, int]:
        with self._lock:
            counts = Counter(
                r.workflow
                for r in self.runs.values()
                if r.wake_at is not None
                and r.wake_at <= now
                and r.status in LIVE
                and r.workflow not in workflows
            )
        return dict(sorted(counts.items())[:limit])
