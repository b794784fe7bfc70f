"""The synchronous methods every store has: what the engine asks of its storage, and nothing
about how a store keeps its data. `Store` (base.py) adds the clock, the async twins and the
change watch over them."""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..core.concurrency import GroupUse
from ..core.limits import Grant, Limiter
from ..core.new_run import NewRun
from ..core.pauses import WorkflowPauseRecord
from ..core.records import (
    NOT_EDITED,
    Audit,
    AuditRecord,
    Commit,
    CommitResult,
    EntryRecord,
    EventRecord,
    MessageRecord,
    OutgoingMessage,
    RunnerRecord,
    RunRecord,
)
from ..core.schedules import RunStart, ScheduleDeclaration, ScheduleRecord
from ..core.streams import ChunkRecord

# A statement of the caller's own: SQL text (`%s` placeholders) and its parameters.
Statement = tuple[str, Sequence[Any]]


class StoreMethods(ABC):
    """Methods are synchronous (the Django store runs them in Django's database thread)."""

    # --- runs ---
    @abstractmethod
    def get_or_create_run(self, new: NewRun, together: Sequence[Statement] = ()) -> tuple[RunRecord, bool]:
        """The run of (new.workflow, new.key), created runnable when missing; a stable key makes
        starts idempotent. `trace_context`, `priority` and `concurrency_group` are kept with a new
        run only. `first_message` (its queue, body and trace context; no target) is stored for a
        new run only, in the transaction that creates it, so the run is never seen without it.
        `together`: the caller's own statements (SQL text, parameters), run first in the same
        transaction: one that fails (a unique key taken) leaves nothing written and raises."""

    @abstractmethod
    def get_or_create_held_run(
        self, new: NewRun, *, owner: str, lease_seconds: float
    ) -> tuple[RunRecord, bool, bool]:
        """`get_or_create_run` for a runner that will execute a new run itself (`Runner.start`):
        (run, created, held). A new run is created already leased to `owner` for `lease_seconds`,
        as a claim would leave it (held True): no claim follows and no other runner is woken; a
        key already taken answers its run, not held. Never for a run in a concurrency group (its
        admission is the claim's), nor with a first message."""

    @abstractmethod
    def get_run(self, run_id: str) -> RunRecord:
        """Raises RunNotFound."""

    @abstractmethod
    def find_run(self, workflow: str, key: list[str]) -> RunRecord:
        """Raises RunNotFound."""

    # --- the runner's side ---
    @abstractmethod
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
        """Take up to `limit` runnable runs of `workflows` (due, or whose lease lapsed) for `owner`,
        higher priority first, then by due time and id. `concurrency` (workflow -> max, the
        caller's code): a run of such a workflow with a group is taken only while fewer than max
        runs of its group execute under a live lease, counting the ones this claim takes."""

    @abstractmethod
    def next_wake_at(
        self, *, owner: str, workflows: list[str], concurrency: Mapping[str, int] | None = None
    ) -> dt.datetime | None:
        """When the earliest run of `workflows` not held by `owner` is due (None: nothing scheduled).
        Runs held back in a full group (per `concurrency`) do not count, at the latest once a
        claim has seen them: their group's executing runs' lease expiries do (a slot frees then
        at the latest; a run of the group leaving `running` notifies before)."""

    @abstractmethod
    def unpark_held(self, workflows: list[str]) -> int:
        """Put back in line every live run of `workflows` that a claim set aside in a full group
        (due again at its due time, its place in line kept), and wake runners; returns how many.
        A runner calls it when it starts, before its first claim: its code's `max` may have been
        raised, or its `concurrency` removed, and runs set aside would otherwise come back only one
        per freed slot. The next claim sets aside again those whose group is still full."""

    @abstractmethod
    def concurrency_use(self, caps: Mapping[str, int], *, now: dt.datetime) -> list[GroupUse]:
        """For the dashboard and the inspector: the groups of the workflows in `caps` that have
        runs executing or due, with how many of each, busiest first."""

    @abstractmethod
    def heartbeat(
        self, *, owner: str, run_ids: list[str], lease_seconds: float, now: dt.datetime
    ) -> dict[str, bool]:
        """Extend the leases still held; returns {run_id: cancel_requested} for those."""

    @abstractmethod
    def release(self, *, owner: str, run_ids: list[str], now: dt.datetime) -> None:
        """Give runs back, runnable at once (a runner stopping): their cut attempts are lost,
        as `recover_cut_attempts` records them."""

    @abstractmethod
    def recover_cut_attempts(
        self, run_id: str, *, owner: str, reason: str, lost_at: dt.datetime | None, now: dt.datetime
    ) -> None:
        """Before a run taken over executes again: mark the events of attempts that never recorded
        an outcome `lost` (named in a `$lost` event), and record the attempt of each step marked
        `running` as `lost` (with `reason`), so the step's rerun is its next attempt. Raises
        LeaseLost when `owner` does not hold the run."""

    @abstractmethod
    def load_history(self, run_id: str) -> list[EntryRecord]:
        """Every current entry of the run, in one query."""

    @abstractmethod
    def load_resume(self, run_id: str) -> tuple[list[EntryRecord], list[MessageRecord] | None]:
        """What a resumed execution reads first: the history and, where the store reads it in the
        same round trip, the run's unconsumed messages, oldest first (None: not read; the
        execution then asks `available_messages` when a wait needs them)."""

    @abstractmethod
    def commit(self, *, run_id: str, owner: str, commit: Commit, now: dt.datetime) -> CommitResult:
        """Write it all in one transaction, or nothing; raises LeaseLost when `owner` lost the run."""

    @abstractmethod
    def available_messages(self, run_id: str, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        """Oldest unconsumed messages of the run on those queues (None: all)."""

    # --- runners' presence ---
    @abstractmethod
    def register_runner(self, runner: RunnerRecord) -> None:
        """Record a runner's presence (replacing any record of the same owner)."""

    @abstractmethod
    def touch_runner(self, owner: str, *, now: dt.datetime, clock_offset: float | None = None) -> bool:
        """Its heartbeat: `last_seen = now` (and its wall clock's offset to the database's, when
        measured). False when no record of `owner` is left (it was forgotten as dead): the runner
        registers again."""

    @abstractmethod
    def unregister_runner(self, owner: str) -> None:
        """Remove the runner's record (a graceful stop, or a dead runner taken over)."""

    @abstractmethod
    def list_runners(self) -> list[RunnerRecord]:
        """Every runner record, alive or not (`RunnerRecord.alive` tells), oldest first."""

    @abstractmethod
    def forget_runners(self, *, seen_before: dt.datetime) -> int:
        """Remove the records of runners not seen since `seen_before`; returns how many."""

    @abstractmethod
    def expire_leases(self, owner: str, *, lapsed_at: dt.datetime, now: dt.datetime) -> int:
        """A dead runner's runs: end the leases `owner` still holds at `lapsed_at` (no later than
        `now`), so any runner claims them at once, as it would a lapsed lease (the claim marks them
        taken over, and their cut attempts are recorded lost). Returns how many runs."""

    @abstractmethod
    def due_elsewhere(self, workflows: list[str], *, now: dt.datetime, limit: int = 50) -> dict[str, int]:
        """Workflows other than `workflows` with runs due now (pending, or waiting past their
        wake time), and how many: work a runner serving `workflows` sees and cannot take."""

    # --- callers' side ---
    @abstractmethod
    def send(
        self, message: OutgoingMessage, *, now: dt.datetime, audit: Audit | None = None
    ) -> MessageRecord:
        """Store a message and wake its run; stored before this returns. With `audit`, an
        operator's send (e.g. an approval), written to the audit log in the same transaction."""

    @abstractmethod
    def get_message(self, message_id: int) -> MessageRecord: ...

    @abstractmethod
    def request_cancel(self, run_id: str, *, now: dt.datetime) -> RunRecord: ...

    @abstractmethod
    def acquire_limit(
        self, limiter: Limiter, *, holder: str, expires_at: dt.datetime, now: dt.datetime
    ) -> Grant:
        """Admit one attempt under `limiter` now, across every runner, or say when to ask again
        (core.limits.decide over the limiter's uses). `holder` names the attempt; a slot whose
        holder never releases it stops counting as held at `expires_at`."""

    @abstractmethod
    def release_limit(self, slot: int, *, tokens: int, now: dt.datetime) -> None:
        """The attempt holding `slot` ended; it used `tokens` (charged to tokens_per_minute)."""

    @abstractmethod
    def limiter_use(self, names: list[str], *, now: dt.datetime) -> dict[str, dict[str, int]]:
        """For the dashboard: per limiter, attempts `held` now, `started` and `tokens` in the last
        minute."""

    @abstractmethod
    def list_events(self, run_id: str, *, after: int = 0, limit: int = 1000) -> list[EventRecord]: ...

    @abstractmethod
    def list_chunks(
        self, run_id: str, stream: str | None, *, after: int = 0, limit: int = 1000
    ) -> list[ChunkRecord]:
        """The run's stream chunks with id > `after`, oldest first (of every stream when None)."""

    # --- operators' repairs: each one transaction with its audit entry --------------------------------
    @abstractmethod
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
        """Run the run again from this current entry: it and the later entries of its scope become
        superseded history (kept, with their attempts), earlier ones stay; the run is runnable at
        once. With `input`, the step reruns with it instead of its recorded input. The messages the
        superseded entries consumed go back on their queues in their original order (`redeliver`
        False: they stay consumed, and the replayed waits wait for new ones); the audit entry names
        them. RunBusy while a runner holds the run; BadInput for an entry that is not current."""

    @abstractmethod
    def fork(
        self,
        run_id: str,
        entry_id: int,
        *,
        audit: Audit,
        now: dt.datetime,
        key: list[str] | None = None,
        input: Any = NOT_EDITED,
        group_of: Callable[[list[str]], str | None] | None = None,
    ) -> RunRecord:
        """A new run of the same workflow and version from this run's history up to a current
        root entry: the entries before it copied (nested scopes, attempts and consumed messages
        included), it and the later ones run fresh; runnable at once, under `key` (KeyTaken when
        held) or a derived one (`core.forks.derived_key`), in the concurrency group `group_of(key)`.
        With `input`, the entry (a step) runs first with it. Audited on both runs; the original
        is only read. EntryNotFound for an entry the run never had; NotApplicable for a nested,
        superseded one, or one after an unfinished entry."""

    @abstractmethod
    def retry_now(self, run_id: str, entry_id: int, *, audit: Audit, now: dt.datetime) -> RunRecord:
        """Skip the rest of a step's retry backoff: its next attempt is due now."""

    @abstractmethod
    def cancel(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        """An operator's `request_cancel`, audited; BadInput when the run has already finished."""

    @abstractmethod
    def pause(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        """Pause a run, audited: an idle one at once (its due time kept for its resume), a running
        one at its next entry. NotApplicable when it is paused, asked to pause, or finished."""

    @abstractmethod
    def resume(self, run_id: str, *, audit: Audit, now: dt.datetime) -> RunRecord:
        """Resume a paused run, audited: due at its kept due time, or now if that passed. A
        running run asked to pause is no longer asked. NotApplicable for any other run."""

    @abstractmethod
    def pause_workflow(self, workflow: str, *, audit: Audit, now: dt.datetime) -> WorkflowPauseRecord:
        """No run of `workflow` is claimed until it is resumed. NotApplicable when already paused."""

    @abstractmethod
    def resume_workflow(self, workflow: str, *, audit: Audit, now: dt.datetime) -> WorkflowPauseRecord:
        """Its runs are claimed again. NotApplicable when it is not paused."""

    @abstractmethod
    def paused_workflows(self) -> list[WorkflowPauseRecord]:
        """The paused workflows by name, each with its count of paused runs."""

    @abstractmethod
    def audit_log(self, run_id: str) -> list[AuditRecord]:
        """The run's audit entries, newest first."""

    @abstractmethod
    def superseded(self, run_id: str) -> list[EntryRecord]:
        """Entries an operator's replay replaced, oldest first (kept as history)."""

    # --- start options (the client's on_conflict / debounce) ---------------------------------------
    @abstractmethod
    def start_run(
        self, new: NewRun, *, replace: bool = False, debounce: float | None = None
    ) -> tuple[RunRecord, bool]:
        """`get_or_create_run` with start options, in one transaction (`first_message`: stored
        with a run this creates; it does not move the run's start). With `debounce` (seconds),
        a run of the key that has not started yet is pushed back to start `debounce` seconds from
        now, its state replaced by `initial_state` (not created: False); a new run waits that long
        too. With `replace`, an existing run of the key (that was not just debounced) is detached
        from the key (it keeps `key`, but the key finds it no more), asked to cancel when live and
        given a `$replaced` event naming its successor, and a new run takes the key (created: True)."""

    # --- schedules ------------------------------------------------------------------------------------
    @abstractmethod
    def sync_schedules(
        self, *, declared: list[ScheduleDeclaration], served: list[str], now: dt.datetime
    ) -> None:
        """A starting runner's upsert of the schedules its code declares: a new schedule, or one
        whose cron or timezone changed, starts at its `first_fire_at`; others keep their next fire
        (so fires missed while runners were down are caught up as declared) and their paused flag.
        A schedule of a workflow in `served` that is no longer declared is marked gone (kept)."""

    @abstractmethod
    def list_schedules(self) -> list[ScheduleRecord]:
        """Every schedule row, by name."""

    @abstractmethod
    def fire_schedule(
        self,
        name: str,
        *,
        expected_next: dt.datetime,
        starts: list[RunStart],
        next_fire_at: dt.datetime,
        now: dt.datetime,
    ) -> list[RunRecord] | None:
        """Start a fire's runs (get-or-create by key) and move the schedule on to `next_fire_at`,
        in one transaction, if its next fire is still `expected_next` and it is neither paused
        nor gone; None (nothing written) when another runner fired it first."""

    @abstractmethod
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
        """Pause or resume a schedule (an operator's action). A resume sets its next fire to
        `next_fire_at`: fire times passed while it was paused are not caught up. BadInput for an
        unknown schedule."""
