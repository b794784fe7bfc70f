"""Operators' repairs in the in-memory store, mixed into `MemoryStore`."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from typing import Any

from ..core import repair_rules
from ..core.exceptions import BadInput
from ..core.jsonvalue import normalize
from ..core.records import (
    CHILD_QUEUE_PREFIX,
    NOT_EDITED,
    Audit,
    AuditAction,
    AuditRecord,
    EntryKind,
    EntryRecord,
    EntryStatus,
    RunRecord,
    RunStatus,
)
from .memory_data import MemoryData


class MemoryRepairs(MemoryData):
    """Operators' repairs, each with its audit entry."""

    def replay(
        self,
        run_id: str,
        entry_id: int,
        *,
        audit: Audit,
        now: dt.datetime,
        input: Any = NOT_EDITED,
        redeliver: bool = True,
    ) -> RunRecord:
        if input is not NOT_EDITED:  # refused before anything changes (this store has no rollback)
            input = normalize(input, "the edited input")
        with self._lock:
            run = self._run(run_id)
            repair_rules.check(repair_rules.REPLAY, run_id, run.status)
            first = self._current_entry(run_id, entry_id)
            if first is None:
                raise BadInput(f"run {run_id} has no current entry {entry_id}")
            if input is not NOT_EDITED and first.kind != EntryKind.STEP:
                raise BadInput("only a step's input can be edited")
            doomed = sorted(
                (e for rid, e in self._current() if rid == run_id and e.scope == first.scope
                 and e.position >= first.position),
                key=lambda e: e.position,
            )  # fmt: skip
            doomed_ids = {e.id for e in doomed}
            if redeliver and any(
                by in doomed_ids and not self.messages[m].queue.startswith(CHILD_QUEUE_PREFIX)
                for m, by in self.consumed_by.items()
            ):
                # The in-memory store is going away: it has no twin of the Django store's re-delivery.
                raise NotImplementedError("the in-memory store does not re-deliver consumed messages")
            self.superseded_ids.update(e.id for e in doomed)
            details: dict[str, Any] = {
                "from_entry": first.id, "from_step": first.name, "superseded": [e.id for e in doomed]
            }  # fmt: skip
            if input is not NOT_EDITED:
                new = replace(
                    first, id=next(self._ids), status=EntryStatus.RETRYING, input=input,
                    output=None, error=None, meta=None, attempts=0, started_at=None, finished_at=None, wake_at=now,
                )  # fmt: skip
                self.entries[new.id] = (run_id, new)
                details["input"] = input
            self.runs[run_id] = replace(
                run, status=RunStatus.PENDING, wake_at=now, lease_owner="", result=None, error=None,
                cancel_requested=False, epoch=run.epoch + 1,
            )  # fmt: skip
            self._audit(run_id, AuditAction.REPLAY, audit, details, now)
            return self._copy(self.runs[run_id])

    def retry_now(self, run_id: str, entry_id: int, *, audit: Audit, now: dt.datetime) -> RunRecord:
        with self._lock:
            run = self._run(run_id)
            repair_rules.check(repair_rules.RETRY_NOW, run_id, run.status)
            entry = self._current_entry(run_id, entry_id)
            if entry is None:
                raise BadInput(f"run {run_id} has no current entry {entry_id}")
            repair_rules.check(
                repair_rules.RETRY_NOW, run_id, run.status, step=entry.name, step_status=entry.status
            )
            self.entries[entry.id] = (run_id, replace(entry, wake_at=now))
            if run.status == RunStatus.WAITING:
                self.runs[run_id] = replace(run, wake_at=now)
            self._audit(run_id, AuditAction.RETRY_NOW, audit, {"entry": entry.id, "step": entry.name}, now)
            return self._copy(self.runs[run_id])

    def cancel(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        with self._lock:
            run = self._run(run_id)
            repair_rules.check(repair_rules.CANCEL, run_id, run.status)
            run = self.request_cancel(run_id, now=now)
            self._audit(run_id, AuditAction.CANCEL, audit, {}, now)
            return run

    def audit_log(self, run_id: str) -> list[AuditRecord]:
        with self._lock:
            return [a for a in reversed(self.audits) if a.run_id == run_id]

    def superseded(self, run_id: str) -> list[EntryRecord]:
        with self._lock:
            found = [
                e for eid, (rid, e) in self.entries.items() if rid == run_id and eid in self.superseded_ids
            ]
            return sorted(found, key=lambda e: e.id)
