"""The in-memory store's data and its runs (`MemoryData`): what the other parts of
`MemoryStore` are mixed over."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import threading
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from ..core.exceptions import RunFinished, RunNotFound
from ..core.ids import new_run_id
from ..core.limits import WINDOW, Grant, Limiter, SlotUse, decide
from ..core.new_run import NewRun
from ..core.records import (
    TERMINAL,
    AttemptWrite,
    Audit,
    AuditAction,
    AuditRecord,
    EntryRecord,
    EventOrigin,
    EventRecord,
    MessageRecord,
    OutgoingMessage,
    RunnerRecord,
    RunRecord,
    RunStatus,
)
from ..core.schedules import REPLACED_EVENT, ScheduleRecord
from .base import Store


def _use_figures(uses: list[SlotUse], now: dt.datetime) -> dict[str, int]:
    since = now - WINDOW
    return {
        "held": sum(1 for u in uses if u.released_at is None and u.expires_at > now),
        "started": sum(1 for u in uses if u.acquired_at > since),
        "tokens": sum(u.tokens for u in uses if u.released_at is not None and u.released_at > since),
    }


class MemoryData(Store):
    """The in-memory store's data and its runs: created, found, started, sent to, limited."""

    def __init__(self) -> None:
        self.runs: dict[str, RunRecord] = {}
        self.entries: dict[int, tuple[str, EntryRecord]] = {}  # id -> (run id, entry)
        self.attempts: list[tuple[int, AttemptWrite]] = []  # (entry id, attempt)
        self.messages: dict[int, MessageRecord] = {}
        self.consumed_by: dict[int, int] = {}
        self.events: list[EventRecord] = []
        self.event_origins: dict[int, EventOrigin] = {}  # a running step's events: who sent them
        self.superseded_ids: set[int] = set()  # entries an operator's replay replaced (kept)
        self.audits: list[AuditRecord] = []
        self.runners: dict[str, RunnerRecord] = {}  # runners' presence, by owner
        self._ids = itertools.count(1)
        self._started: set[str] = set()
        self.detached: set[str] = set()  # runs replaced under their key: the key finds them no more
        self.schedules: dict[str, ScheduleRecord] = {}
        self._lock = threading.RLock()
        self.limit_slots: dict[int, tuple[str, str, SlotUse]] = {}  # id -> (limiter, holder, use)

    def _copy(self, run: RunRecord) -> RunRecord:
        return replace(run, state=copy.deepcopy(run.state), key=list(run.key))

    # --- runs ---
    def get_or_create_run(self, new: NewRun) -> tuple[RunRecord, bool]:
        with self._lock:
            for run in self.runs.values():
                if run.workflow == new.workflow and run.key == new.key and run.id not in self.detached:
                    return self._copy(run), False
            run = RunRecord(
                id=str(new_run_id()),
                workflow=new.workflow,
                key=list(new.key),
                version=new.version,
                status=RunStatus.PENDING,
                state=copy.deepcopy(new.initial_state),
                created_at=new.now,
                wake_at=new.now,
                trace_context=dict(new.trace_context) if new.trace_context else None,
                priority=new.priority,
                concurrency_group=new.concurrency_group,
                parent_id=new.parent_id,
                parent_queue=new.parent_queue,
            )
            self.runs[run.id] = run
            if new.first_message is not None:
                self._store_message(run.id, new.first_message, new.now)
            return self._copy(run), True

    def get_or_create_held_run(
        self, new: NewRun, *, owner: str, lease_seconds: float
    ) -> tuple[RunRecord, bool, bool]:
        """As the PostgreSQL store: a new run leased to `owner`, as a claim would leave it."""
        with self._lock:
            run, created = self.get_or_create_run(new.but(concurrency_group=None, first_message=None))
            if not created:
                return run, False, False
            held = replace(
                self.runs[run.id],
                status=RunStatus.RUNNING,
                lease_owner=owner,
                wake_at=new.now + dt.timedelta(seconds=lease_seconds),
            )
            self.runs[run.id] = held
            self._started.add(run.id)
            return replace(self._copy(held), fresh=True, due_at=new.now), True, True

    def get_run(self, run_id: str) -> RunRecord:
        with self._lock:
            if run_id not in self.runs:
                raise RunNotFound(f"no run with id {run_id!r}")
            return self._copy(self.runs[run_id])

    def find_run(self, workflow: str, key: list[str]) -> RunRecord:
        with self._lock:
            for run in self.runs.values():
                if run.workflow == workflow and run.key == list(key) and run.id not in self.detached:
                    return self._copy(run)
        raise RunNotFound(f"no {workflow} run with key {key!r}")

    # --- start options ---
    def start_run(
        self, new: NewRun, *, replace: bool = False, debounce: float | None = None
    ) -> tuple[RunRecord, bool]:
        now = new.now
        with self._lock:
            run, created = self.get_or_create_run(new)
            wake = now + dt.timedelta(seconds=debounce or 0)
            if created:
                self.runs[run.id] = _replaced(self.runs[run.id], wake_at=wake)
                return self._copy(self.runs[run.id]), True
            old = self.runs[run.id]
            if debounce is not None and _not_started(old, self._started):
                self.runs[run.id] = _replaced(old, wake_at=wake, state=copy.deepcopy(new.initial_state))
                return self._copy(self.runs[run.id]), False
            if not replace:
                return run, False
            self.detached.add(old.id)
            successor, _ = self.get_or_create_run(new)
            self.runs[successor.id] = _replaced(self.runs[successor.id], wake_at=wake)
            if old.status not in TERMINAL:
                self.request_cancel(old.id, now=now)
            self.events.append(
                EventRecord(
                    id=next(self._ids),
                    run_id=old.id,
                    name=REPLACED_EVENT,
                    payload={"by": successor.id},
                    created_at=now,
                )
            )
            return self._copy(self.runs[successor.id]), True

    # --- callers' side ---
    def send(
        self, message: OutgoingMessage, *, now: dt.datetime, audit: Audit | None = None
    ) -> MessageRecord:
        with self._lock:
            record = self._insert_message(message, now)
            assert record is not None  # only a child's report to its parent is ever dropped
            if audit is not None:
                self._audit(
                    record.run_id,
                    AuditAction.SEND,
                    audit,
                    {"queue": message.queue, "message": record.id},
                    now,
                )
            return record

    def get_message(self, message_id: int) -> MessageRecord:
        with self._lock:
            return self.messages[message_id]

    def request_cancel(self, run_id: str, *, now: dt.datetime) -> RunRecord:
        with self._lock:
            run = self.runs.get(run_id)
            if run is None:
                raise RunNotFound(f"no run with id {run_id!r}")
            if run.status not in TERMINAL and not run.cancel_requested:
                wake = run.wake_at if run.status == RunStatus.RUNNING else now
                run = replace(run, cancel_requested=True, wake_at=wake)
                self.runs[run_id] = run
            return self._copy(run)

    # --- limiters ---
    def acquire_limit(
        self, limiter: Limiter, *, holder: str, expires_at: dt.datetime, now: dt.datetime
    ) -> Grant:
        with self._lock:
            horizon = now - WINDOW
            for slot_id, (_name, _h, use) in list(self.limit_slots.items()):
                if use.acquired_at < horizon and (use.released_at or use.expires_at) < horizon:
                    del self.limit_slots[slot_id]  # out of every window: forget it
            uses = [use for name, _h, use in self.limit_slots.values() if name == limiter.name]
            admitted, retry_at, reason = decide(limiter, uses, now)
            if not admitted:
                return Grant(slot=None, retry_at=retry_at, reason=reason)
            slot_id = next(self._ids)
            self.limit_slots[slot_id] = (
                limiter.name,
                holder,
                SlotUse(acquired_at=now, released_at=None, expires_at=expires_at, tokens=0),
            )
            return Grant(slot=slot_id)

    def release_limit(self, slot: int, *, tokens: int, now: dt.datetime) -> None:
        with self._lock:
            found = self.limit_slots.get(slot)
            if found is not None and found[2].released_at is None:
                name, holder, use = found
                self.limit_slots[slot] = (name, holder, replace(use, released_at=now, tokens=max(0, tokens)))

    def limiter_use(self, names: list[str], *, now: dt.datetime) -> dict[str, dict[str, int]]:
        with self._lock:
            return {
                name: _use_figures([u for n, _h, u in self.limit_slots.values() if n == name], now)
                for name in names
            }

    def list_events(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[EventRecord]:
        with self._lock:
            return [e for e in self.events if e.run_id == run_id and e.id > after][:limit]

    def _store_message(self, run_id: str, outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord:
        message = MessageRecord(
            id=next(self._ids), run_id=run_id, queue=outgoing.queue, body=outgoing.body,
            sent_at=now, trace_context=dict(outgoing.trace_context) if outgoing.trace_context else None,
        )  # fmt: skip
        self.messages[message.id] = message
        return message

    def _insert_message(self, outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord | None:
        if outgoing.run_id is not None:
            run = self.runs.get(outgoing.run_id)
            if run is None:
                raise RunNotFound(f"no run with id {outgoing.run_id!r}")
        else:
            assert outgoing.workflow is not None and outgoing.key is not None  # as the Django store
            run, _ = self.get_or_create_run(NewRun.of_message(outgoing, now))
            run = self.runs[run.id]
        if run.status in TERMINAL:
            if outgoing.drop_if_ended:
                return None
            raise RunFinished(f"run {run.id} is {run.status}; it takes no more messages")
        if outgoing.priority is not None:
            run = self.runs[run.id] = replace(run, priority=outgoing.priority)
        if run.status in (RunStatus.PENDING, RunStatus.WAITING):
            self.runs[run.id] = replace(run, wake_at=now)
        return self._store_message(run.id, outgoing, now)

    def _current(self) -> Iterator[tuple[str, EntryRecord]]:
        return ((rid, e) for eid, (rid, e) in self.entries.items() if eid not in self.superseded_ids)

    def _audit(
        self, run_id: str, action: str, audit: Audit, details: dict[str, Any], now: dt.datetime
    ) -> None:
        self.audits.append(
            AuditRecord(run_id=run_id, action=action, actor=audit.actor, reason=audit.reason, details=details,
                        created_at=now)
        )  # fmt: skip

    def _run(self, run_id: str) -> RunRecord:
        if run_id not in self.runs:
            raise RunNotFound(f"no run with id {run_id!r}")
        return self.runs[run_id]

    def _current_entry(self, run_id: str, entry_id: int) -> EntryRecord | None:
        found = self.entries.get(entry_id)
        if found is None or found[0] != run_id or entry_id in self.superseded_ids:
            return None
        return found[1]


_replaced = replace  # the dataclasses function, under a name the methods' `replace` flag does not shadow


def _not_started(run: RunRecord, started: set[str]) -> bool:
    """A run no runner has claimed yet (a debounced start may still push it back)."""
    return run.status == RunStatus.PENDING and run.id not in started and not run.cancel_requested
