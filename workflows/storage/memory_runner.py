"""The runner's side of the in-memory store (claims, leases, commits), mixed into `MemoryStore`."""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, cast

from ..core.concurrency import GroupUse, admit
from ..core.exceptions import ChildConflict, LeaseLost
from ..core.new_run import NewRun
from ..core.records import (
    LIVE,
    LOST_EVENTS,
    TERMINAL,
    AttemptWrite,
    ChildStart,
    Commit,
    CommitResult,
    EntryKind,
    EntryRecord,
    EntryStatus,
    EventRecord,
    MessageRecord,
    Outcome,
    RunRecord,
    RunStatus,
    lost_attempt_error,
    lost_events_payload,
)
from .memory_data import MemoryData


class MemoryRunnerSide(MemoryData):
    """What a runner asks: claims, leases, history, commits, messages."""

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

    def available_messages(self, run_id: str, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        with self._lock:
            found = [
                m
                for m in sorted(self.messages.values(), key=lambda m: m.id)
                if m.run_id == run_id and m.consumed_at is None and (not queues or m.queue in queues)
            ]
            return found[:limit]


def _held_back(run: RunRecord, executing: dict[str, int], caps: dict[str, int]) -> bool:
    """A run that is not executing, in a group whose slots are all taken."""
    group = run.concurrency_group
    if group is None or run.workflow not in caps or run.status == RunStatus.RUNNING:
        return False
    return executing.get(group, 0) >= caps[run.workflow]
