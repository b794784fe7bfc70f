"""The in-memory store's schedules, mixed into `MemoryStore`."""

from __future__ import annotations

import datetime as dt

from ..core.exceptions import BadInput
from ..core.new_run import NewRun
from ..core.records import (
    RunRecord,
)
from ..core.schedules import LAST_RUNS, RunStart, ScheduleDeclaration, ScheduleRecord
from .memory_data import MemoryData, _replaced


class MemorySchedules(MemoryData):
    """Schedules: synced by starting runners, fired, paused."""

    def sync_schedules(
        self, *, declared: list[ScheduleDeclaration], served: list[str], now: dt.datetime
    ) -> None:
        with self._lock:
            names = set()
            for d in declared:
                names.add(d.name)
                row = self.schedules.get(d.name)
                if row is None:
                    self.schedules[d.name] = ScheduleRecord(
                        name=d.name, workflow=d.workflow, cron=d.cron, timezone=d.timezone, catch_up=d.catch_up,
                        next_fire_at=d.first_fire_at, created_at=now, updated_at=now,
                    )  # fmt: skip
                    continue
                retimed = (
                    (row.cron, row.timezone) != (d.cron, d.timezone) or row.gone or row.next_fire_at is None
                )
                self.schedules[d.name] = _replaced(
                    row, workflow=d.workflow, cron=d.cron, timezone=d.timezone, catch_up=d.catch_up, gone=False,
                    next_fire_at=d.first_fire_at if retimed else row.next_fire_at, updated_at=now,
                )  # fmt: skip
            for name, row in list(self.schedules.items()):
                if name not in names and row.workflow in served and not row.gone:
                    self.schedules[name] = _replaced(row, gone=True, updated_at=now)

    def list_schedules(self) -> list[ScheduleRecord]:
        with self._lock:
            return [_replaced(r, last_runs=list(r.last_runs)) for _n, r in sorted(self.schedules.items())]

    def fire_schedule(
        self,
        name: str,
        *,
        expected_next: dt.datetime,
        starts: list[RunStart],
        next_fire_at: dt.datetime,
        now: dt.datetime,
    ) -> list[RunRecord] | None:
        with self._lock:
            row = self.schedules.get(name)
            if row is None or row.paused or row.gone or row.next_fire_at != expected_next:
                return None
            runs = [self.get_or_create_run(NewRun.of_fire(s, now))[0] for s in starts]
            fired = [
                {"fire_time": s.fire_time.isoformat(), "run_id": r.id}
                for s, r in zip(starts, runs, strict=True)
            ]
            self.schedules[name] = _replaced(
                row,
                next_fire_at=next_fire_at,
                last_fire_at=starts[-1].fire_time if starts else row.last_fire_at,
                last_runs=(fired[::-1] + row.last_runs)[:LAST_RUNS],
                updated_at=now,
            )
            return runs

    def pause_schedule(
        self,
        name: str,
        *,
        paused: bool,
        actor: str,
        reason: str,
        next_fire_at: dt.datetime | None,
        now: dt.datetime,
    ) -> ScheduleRecord:
        with self._lock:
            row = self.schedules.get(name)
            if row is None:
                raise BadInput(f"no schedule named {name!r}")
            if paused:
                row = _replaced(
                    row, paused=True, paused_at=now, paused_by=actor, pause_reason=reason, updated_at=now
                )
            else:
                row = _replaced(
                    row, paused=False, paused_at=None, paused_by="", pause_reason="", updated_at=now,
                    next_fire_at=next_fire_at,
                )  # fmt: skip
            self.schedules[name] = row
            return row
