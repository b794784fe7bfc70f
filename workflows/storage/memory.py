"""An in-memory store with the Django store's semantics, for fast unit tests of the engine.

Not for production: it keeps nothing across processes. It implements the same contract (leases,
fencing, message consumption, wake-ups) so the engine's tests prove the engine, not the SQL.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import threading
from collections.abc import Iterator, Mapping
from dataclasses import replace
from typing import Any, cast

from ..core import repair_rules
from ..core.concurrency import GroupUse, admit
from ..core.exceptions import BadInput, ChildConflict, LeaseLost, RunFinished, RunNotFound
from ..core.ids import new_run_id
from ..core.jsonvalue import normalize
from ..core.limits import WINDOW, Grant, Limiter, SlotUse, decide
from ..core.new_run import NewRun
from ..core.records import (
    LIVE,
    LOST_EVENTS,
    NOT_EDITED,
    TERMINAL,
    AttemptWrite,
    Audit,
    AuditAction,
    AuditRecord,
    ChildStart,
    Commit,
    CommitResult,
    EntryKind,
    EntryRecord,
    EntryStatus,
    EventOrigin,
    EventRecord,
    MessageRecord,
    Outcome,
    OutgoingMessage,
    RunnerRecord,
    RunRecord,
    RunStatus,
    lost_attempt_error,
    lost_events_payload,
)
from ..core.schedules import LAST_RUNS, REPLACED_EVENT, RunStart, ScheduleDeclaration, ScheduleRecord
from .base import Store
from .memory_presence import MemoryPresence


def _use_figures(uses: list[SlotUse], now: dt.datetime) -> dict[str, int]:
    since = now - WINDOW
    return {
        "held": sum(1 for u in uses if u.released_at is None and u.expires_at > now),
        "started": sum(1 for u in uses if u.acquired_at > since),
        "tokens": sum(u.tokens for u in uses if u.released_at is not None and u.released_at > since),
    }


class MemoryStore(MemoryPresence, Store):
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

    # --- schedules ---
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

    # --- runner side ---
    def claim(
        self,
        *,
        owner: str,
        workflows: list[str],
        limit: int,
        lease_seconds: float,
        now: dt.datetime,
        concurrency: Mapping[str, int] | None = None,
    ) -> list[RunRecord]:
        with self._lock:
            due = sorted(  # claim order: priority desc, then due time (a stable sort keeps FIFO)
                (
                    r
                    for r in self.runs.values()
                    if r.wake_at is not None
                    and r.wake_at <= now
                    and r.status in LIVE
                    and r.workflow in workflows
                ),
                key=lambda r: (-r.priority, cast(dt.datetime, r.wake_at)),  # never None: filtered above
            )
            taken = set(
                admit(
                    # a run asked to cancel needs no slot: it only ends
                    [(r.id, r.workflow, None if r.cancel_requested else r.concurrency_group) for r in due],
                    self._executing(now),
                    dict(concurrency or {}),
                    limit,
                )
            )
            claimed: list[RunRecord] = []
            for run in (r for r in due if r.id in taken):
                held = replace(
                    run,
                    status=RunStatus.RUNNING,
                    lease_owner=owner,
                    wake_at=now + dt.timedelta(seconds=lease_seconds),
                )
                self.runs[run.id] = held
                claimed.append(
                    replace(
                        self._copy(held),
                        fresh=run.id not in self._started,
                        taken_over=run.status == RunStatus.RUNNING,  # its runner's lease lapsed
                        previous_owner=run.lease_owner if run.status == RunStatus.RUNNING else "",
                        lease_lapsed_at=run.wake_at if run.status == RunStatus.RUNNING else None,
                        due_at=run.wake_at,
                    )
                )
                self._started.add(run.id)
            return claimed

    def _executing(self, now: dt.datetime | None) -> dict[str, int]:
        """Runs of each group executing: running under a lease that has not lapsed at `now`
        (None: every running run, as the store's schedule sees them)."""
        counts: dict[str, int] = {}
        for r in self.runs.values():
            if r.concurrency_group is None or r.status != RunStatus.RUNNING:
                continue
            if now is None or (r.wake_at is not None and r.wake_at > now):
                counts[r.concurrency_group] = counts.get(r.concurrency_group, 0) + 1
        return counts

    def next_wake_at(
        self, *, owner: str, workflows: list[str], concurrency: Mapping[str, int] | None = None
    ) -> dt.datetime | None:
        with self._lock:
            caps = dict(concurrency or {})
            executing = self._executing(None)
            times = [
                r.wake_at
                for r in self.runs.values()
                if r.wake_at is not None
                and r.status in LIVE
                and r.workflow in workflows
                and not (r.status == RunStatus.RUNNING and r.lease_owner == owner)
                and not _held_back(r, executing, caps)
            ]
            return min(times) if times else None

    def unpark_held(self, workflows: list[str]) -> int:
        """Nothing to do: this store sets no run aside (each claim and schedule read counts its
        groups again, at the caller's `max`), so a raised or removed `max` applies at once."""
        return 0

    def concurrency_use(self, caps: Mapping[str, int], *, now: dt.datetime) -> list[GroupUse]:
        with self._lock:
            executing = self._executing(now)
            waiting: dict[str, int] = {}
            workflow_of: dict[str, str] = {}
            for r in self.runs.values():
                group = r.concurrency_group
                if group is None or r.workflow not in caps or r.status not in LIVE or r.wake_at is None:
                    continue
                workflow_of[group] = r.workflow
                if r.wake_at <= now:
                    waiting[group] = waiting.get(group, 0) + 1
            uses = [
                GroupUse(
                    group=g, workflow=w, running=executing.get(g, 0), max=caps[w], waiting=waiting.get(g, 0)
                )
                for g, w in workflow_of.items()
                if executing.get(g, 0) or waiting.get(g, 0)
            ]
            return sorted(uses, key=lambda u: (-u.running - u.waiting, u.group))

    def heartbeat(
        self, *, owner: str, run_ids: list[str], lease_seconds: float, now: dt.datetime
    ) -> dict[str, bool]:
        with self._lock:
            held: dict[str, bool] = {}
            for run_id in run_ids:
                run = self.runs.get(run_id)
                if run and run.lease_owner == owner and run.status == RunStatus.RUNNING:
                    self.runs[run_id] = replace(run, wake_at=now + dt.timedelta(seconds=lease_seconds))
                    held[run_id] = run.cancel_requested
            return held

    def release(self, *, owner: str, run_ids: list[str], now: dt.datetime) -> None:
        with self._lock:
            for run_id in run_ids:
                run = self.runs.get(run_id)
                if run and run.lease_owner == owner and run.status == RunStatus.RUNNING:
                    self.runs[run_id] = replace(run, status=RunStatus.PENDING, lease_owner="", wake_at=now)
                    self._recover(run_id, f"runner {owner} stopped before the step finished", now, now)

    def load_history(self, run_id: str) -> list[EntryRecord]:
        with self._lock:
            found = [e for rid, e in self._current() if rid == run_id]
            return sorted(found, key=lambda e: (e.scope, e.position))

    def recover_cut_attempts(
        self, run_id: str, *, owner: str, reason: str, lost_at: dt.datetime | None, now: dt.datetime
    ) -> None:
        with self._lock:
            run = self.runs.get(run_id)
            if run is None or run.lease_owner != owner or run.status != RunStatus.RUNNING:
                raise LeaseLost(f"run {run_id} is no longer held by {owner}")
            self._recover(run_id, reason, lost_at, now)

    def _recover(self, run_id: str, reason: str, lost_at: dt.datetime | None, now: dt.datetime) -> None:
        """As the Django store: events of attempts with no outcome are lost, then the attempt of
        each step marked running is recorded as lost."""
        recorded = {
            (e.scope, e.name, a.number)
            for eid, a in self.attempts
            for rid, e in [self.entries[eid]]
            if rid == run_id
        }
        scopes = {e.scope for rid, e in self.entries.values() if rid == run_id}
        lost: list[tuple[int, str, int]] = []
        for i, event in enumerate(self.events):
            origin = self.event_origins.get(event.id)
            if event.run_id != run_id or origin is None or event.lost:
                continue
            if (origin.scope, origin.step, origin.attempt) in recorded:
                continue
            if origin.scope and origin.scope not in scopes:
                continue  # a pruned loop iteration, not a lost attempt
            self.events[i] = replace(event, lost=True)
            lost.append((event.id, origin.step, origin.attempt))
        if lost:
            payload = lost_events_payload(lost)
            self.events.append(
                EventRecord(
                    id=next(self._ids), run_id=run_id, name=LOST_EVENTS, payload=payload, created_at=now
                )
            )
        for entry_id, (rid, entry) in list(self.entries.items()):
            if rid != run_id or entry_id in self.superseded_ids:
                continue
            if entry.kind != EntryKind.STEP or entry.status != EntryStatus.RUNNING:
                continue
            last = max(
                (a for eid, a in self.attempts if eid == entry_id), key=lambda a: a.number, default=None
            )
            started = (last.retry_at or last.finished_at) if last is not None else entry.started_at
            error = lost_attempt_error(reason, lost_at or now)
            self.attempts.append((entry_id, AttemptWrite(
                number=entry.attempts + 1, started_at=started or now, finished_at=lost_at or now,
                outcome=Outcome.LOST, error=error,
            )))  # fmt: skip
            self.entries[entry_id] = (rid, replace(
                entry, attempts=entry.attempts + 1, status=EntryStatus.RETRYING, wake_at=now, error=error
            ))  # fmt: skip

    def _current(self) -> Iterator[tuple[str, EntryRecord]]:
        return ((rid, e) for eid, (rid, e) in self.entries.items() if eid not in self.superseded_ids)

    def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        with self._lock:
            run = self.runs.get(run_id)
            if run is None or run.lease_owner != owner or run.status != RunStatus.RUNNING:
                raise LeaseLost(f"run {run_id} is no longer held by {owner}")
            if any(w.id in self.superseded_ids for w, _a in commit.entries):
                raise LeaseLost(f"run {run_id}: an entry was replaced (an operator replayed the run)")
            snapshot = (dict(self.runs), dict(self.entries), list(self.attempts), dict(self.messages),
                        dict(self.consumed_by), list(self.events))  # fmt: skip
            try:
                return self._commit(run, commit, now)
            except BaseException:
                (self.runs, self.entries, self.attempts, self.messages, self.consumed_by, self.events) = (
                    snapshot
                )
                raise

    def _commit(self, run: RunRecord, commit: Commit, now: dt.datetime) -> CommitResult:
        changes: dict[str, Any] = {}
        if commit.state is not None:
            changes["state"] = copy.deepcopy(commit.state)
        t = commit.transition
        if t is not None:
            changes["status"] = t.status
            changes["lease_owner"] = ""
            if t.status in TERMINAL:
                changes.update(wake_at=None, result=t.result, error=t.error)
            else:
                changes["wake_at"] = t.wake_at
        self.runs[run.id] = replace(run, **changes)
        ids: list[int] = []
        for write, attempt in commit.entries:
            entry_id = write.id if write.id is not None else next(self._ids)
            record = EntryRecord(
                id=entry_id, scope=write.scope, position=write.position, name=write.name, kind=write.kind,
                status=write.status, input=write.input, output=write.output, error=write.error,
                started_at=write.started_at, finished_at=write.finished_at, wake_at=write.wake_at,
                attempts=write.attempts, meta=write.meta,
            )  # fmt: skip
            if write.id is None:
                clash = [
                    e for rid, e in self._current()
                    if rid == run.id and e.scope == write.scope and (e.position == write.position or e.name == write.name)
                ]  # fmt: skip
                if clash:
                    raise LeaseLost(
                        f"entry at {write.scope!r}:{write.position} was written by another runner"
                    )
            self.entries[entry_id] = (run.id, record)
            if attempt is not None:
                self.attempts.append((entry_id, attempt))
            for message_id in write.consumes:
                message = self.messages[message_id]
                if message.consumed_at is not None:
                    raise LeaseLost("a message was consumed by someone else")
                self.messages[message_id] = replace(message, consumed_at=now)
                self.consumed_by[message_id] = entry_id
            ids.append(entry_id)
        for scope in commit.prune:
            doomed = {
                eid for eid, (rid, e) in self.entries.items()
                if rid == run.id and (e.scope == scope or e.scope.startswith(scope + "/"))
            }  # fmt: skip
            self.entries = {eid: v for eid, v in self.entries.items() if eid not in doomed}
            self.attempts = [(eid, a) for eid, a in self.attempts if eid not in doomed]
        for name, payload in commit.events:
            self.events.append(
                EventRecord(id=next(self._ids), run_id=run.id, name=name, payload=payload, created_at=now)
            )
        for name, payload, origin in commit.live_events:
            event_id = next(self._ids)
            self.event_origins[event_id] = origin
            event_record = EventRecord(
                id=event_id, run_id=run.id, name=name, payload=payload, created_at=now,
                step=origin.step, attempt=origin.attempt,
            )  # fmt: skip
            self.events.append(event_record)
        for message_id, response in commit.complete:
            message = self.messages[message_id]
            if message.completed_at is None:
                self.messages[message_id] = replace(message, response=response, completed_at=now)
        for outgoing in commit.messages:
            self._insert_message(outgoing, now)
        for start in commit.children:
            self._start_child(run.id, start, now)
        if t is not None and t.status == RunStatus.WAITING and t.wait_queues is not None:
            if any(
                m.run_id == run.id
                and m.consumed_at is None
                and (not t.wait_queues or m.queue in t.wait_queues)
                for m in self.messages.values()
            ):
                self.runs[run.id] = replace(self.runs[run.id], wake_at=now)
        return CommitResult(entry_ids=ids, cancel_requested=self.runs[run.id].cancel_requested)

    def _start_child(self, parent_id: str, start: ChildStart, now: dt.datetime) -> None:
        child, created = self.get_or_create_run(NewRun.of_child(start, parent_id=parent_id, now=now))
        if not created and child.parent_id != parent_id:
            raise ChildConflict(f"{start.workflow} run {child.id} already has the key {start.key!r}")

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

    def _store_message(self, run_id: str, outgoing: OutgoingMessage, now: dt.datetime) -> MessageRecord:
        message = MessageRecord(
            id=next(self._ids), run_id=run_id, queue=outgoing.queue, body=outgoing.body,
            sent_at=now, trace_context=dict(outgoing.trace_context) if outgoing.trace_context else None,
        )  # fmt: skip
        self.messages[message.id] = message
        return message

    def available_messages(self, run_id: str, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        with self._lock:
            found = [
                m
                for m in sorted(self.messages.values(), key=lambda m: m.id)
                if m.run_id == run_id and m.consumed_at is None and (not queues or m.queue in queues)
            ]
            return found[:limit]

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

    # --- operators' repairs ---
    def replay(
        self, run_id: str, entry_id: int, *, audit: Audit, now: dt.datetime, input: Any = NOT_EDITED
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

    def _run(self, run_id: str) -> RunRecord:
        if run_id not in self.runs:
            raise RunNotFound(f"no run with id {run_id!r}")
        return self.runs[run_id]

    def _current_entry(self, run_id: str, entry_id: int) -> EntryRecord | None:
        found = self.entries.get(entry_id)
        if found is None or found[0] != run_id or entry_id in self.superseded_ids:
            return None
        return found[1]

    def _audit(
        self, run_id: str, action: str, audit: Audit, details: dict[str, Any], now: dt.datetime
    ) -> None:
        self.audits.append(
            AuditRecord(run_id=run_id, action=action, actor=audit.actor, reason=audit.reason, details=details,
                        created_at=now)
        )  # fmt: skip


_replaced = replace  # the dataclasses function, under a name the methods' `replace` flag does not shadow


def _held_back(run: RunRecord, executing: dict[str, int], caps: dict[str, int]) -> bool:
    """A run that is not executing, in a group whose slots are all taken."""
    group = run.concurrency_group
    if group is None or run.workflow not in caps or run.status == RunStatus.RUNNING:
        return False
    return executing.get(group, 0) >= caps[run.workflow]


def _not_started(run: RunRecord, started: set[str]) -> bool:
    """A run no runner has claimed yet (a debounced start may still push it back)."""
    return run.status == RunStatus.PENDING and run.id not in started and not run.cancel_requested
