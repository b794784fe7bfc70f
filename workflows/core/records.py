"""Plain records that flow through the engine: built at the store's edge, never ORM rows."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from .jsonvalue import check_text


class RunStatus(StrEnum):
    PENDING = "pending"  # runnable now (new, or released by a stopping runner)
    RUNNING = "running"  # held by a runner under a lease
    WAITING = "waiting"  # suspended: a timer, a retry backoff or a queue
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    # Held by an operator (`operations.pause_run`) or by a step out of retries with
    # `on_exhausted="pause"`: no lease, claimed by no runner until resumed; its due time waits in
    # `paused_due_at`, so a timer that falls due meanwhile fires on resume.
    PAUSED = "paused"


TERMINAL = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED})  # until a replay
LIVE = (RunStatus.PENDING, RunStatus.WAITING, RunStatus.RUNNING)  # a runner may still pick it up
TAKES_MESSAGES = (*LIVE, RunStatus.PAUSED)  # not finished: a message waits for it


class EntryStatus(StrEnum):
    COMPLETED = "completed"
    FAILED = "failed"  # terminal: critical, timeout or exhausted
    RETRYING = "retrying"  # a failed attempt; the next one is due at wake_at
    WAITING = "waiting"  # a sleep or queue wait not yet satisfied
    RUNNING = "running"  # a slow step's attempt in progress (or cut short by a crash)


class EntryKind(StrEnum):
    STEP = "step"
    SLEEP = "sleep"
    QUEUE = "queue"
    JOIN = "join"
    RACE = "race"
    LOOP = "loop"
    TRY = "try"
    CHECKPOINT = "checkpoint"
    VERSION = "version"
    CHILD = "child"  # a child run started by this one, awaited durably


class Outcome(StrEnum):
    """How one attempt of a step ended."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRITICAL = "critical"
    LOST = "lost"  # cut off by a crash, a stop or a store failure: recorded by the run's next execution


class AuditAction(StrEnum):
    REPLAY = "replay"
    RETRY_NOW = "retry_now"
    CANCEL = "cancel"
    SEND = "send"
    # `manage.py workflows doctor --fix` put back what was stuck (a dead runner's lease, a run set
    # aside in a concurrency group); its details name the finding and the repair.
    DOCTOR = "doctor"
    # A new run started from this run's history up to an entry (`operations.fork_run`): written on
    # both runs, its details naming the other.
    FORK = "fork"
    # An operator paused the run or resumed it (`operations.pause_run` / `resume_run`).
    PAUSE = "pause"
    RESUME = "resume"
    # An operator paused or resumed the run's whole workflow: written on each of its runs not
    # finished then, so a run's log tells why it stood still.
    PAUSE_WORKFLOW = "pause_workflow"
    RESUME_WORKFLOW = "resume_workflow"
    # An action refused for want of its permission: nothing changed; its details name the attempt.
    REFUSED = "refused"


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    id: str
    workflow: str
    key: list[str]
    version: str
    status: str
    state: dict[str, Any]
    result: Any = None
    error: dict[str, Any] | None = None
    created_at: dt.datetime | None = None
    wake_at: dt.datetime | None = None
    lease_owner: str = ""
    cancel_requested: bool = False
    fresh: bool = False  # claimed for the first time: it has no history yet
    # Claimed from a runner that died or was cut off mid-execution (its lease lapsed, the store
    # failed under it, or it stopped mid-step): an attempt of that execution may have been lost.
    taken_over: bool = False
    previous_owner: str = ""  # when taken over: the runner that held it ...
    lease_lapsed_at: dt.datetime | None = None  # ... and when its lease ran out
    # Set by a claim: when the run had become due (its wake_at before the claim replaced it with
    # the lease's expiry). `claimed_at - due_at` is how late it started (observers' latency).
    due_at: dt.datetime | None = None
    epoch: int = 0  # operator replays so far: part of every step's idempotency key
    parent_id: str | None = None  # a child run: the run that started it (`ctx.child`) ...
    parent_queue: str | None = None  # ... and the internal queue its end is reported on
    # The W3C trace context (traceparent, tracestate) of the request that started the run, as
    # `opentelemetry.propagate.inject` wrote it; None when no tracing was configured.
    trace_context: dict[str, str] | None = None
    priority: int = 0  # claims take higher priority first, FIFO within one
    concurrency_group: str | None = None  # the group it counts in (workflow(..., concurrency=...))


# A runner whose presence was not refreshed for this many of its lease periods is dead.
RUNNER_DEAD_AFTER_LEASES = 3


@dataclass(frozen=True, kw_only=True)
class RunnerRecord:
    """A runner process as it announces itself in the store: who it is, where it runs, what it
    serves. Refreshed with its heartbeat, removed when it stops gracefully."""

    owner: str  # the lease owner id its runs carry (`host:pid:uuid8`)
    host: str
    pid: int
    # Where `pid` means something: the kernel's boot id and the process's PID namespace. A
    # runner may judge another's pid only when both are the same as its own.
    machine: str = ""
    process_start: str = ""  # the kernel's start time of `pid` (tells a reused pid apart)
    started_at: dt.datetime
    last_seen: dt.datetime
    lease_seconds: float = 30.0
    concurrency: int = 1
    workflows: dict[str, list[str]] = field(default_factory=dict)  # name -> versions it knows
    # Its host's wall clock minus the database's, in seconds, as last measured (None: unknown).
    # Shown to operators: the runner decides on the database's clock, whatever this says.
    clock_offset: float | None = None

    def dead_after(self) -> dt.timedelta:
        """How long after its last heartbeat the runner counts as dead."""
        return dt.timedelta(seconds=RUNNER_DEAD_AFTER_LEASES * self.lease_seconds)

    def alive(self, now: dt.datetime) -> bool:
        return now - self.last_seen <= self.dead_after()


@dataclass(frozen=True, kw_only=True)
class EntryRecord:
    id: int
    scope: str
    position: int
    name: str
    kind: str
    status: str
    input: Any = None
    output: Any = None
    error: dict[str, Any] | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    wake_at: dt.datetime | None = None
    attempts: int = 0
    meta: dict[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class MessageRecord:
    id: int
    run_id: str
    queue: str
    body: Any
    sent_at: dt.datetime
    response: Any = None
    completed_at: dt.datetime | None = None
    consumed_at: dt.datetime | None = None
    trace_context: dict[str, str] | None = None  # the sender's trace context (see RunRecord)


@dataclass(frozen=True, kw_only=True)
class EventRecord:
    id: int
    run_id: str
    name: str
    payload: Any
    created_at: dt.datetime
    step: str = ""  # the step that broadcast it ("" for the body and on_error) ...
    attempt: int | None = None  # ... and which attempt of it
    lost: bool = False  # broadcast by an attempt that a crash or a store failure cut off

    def as_json(self) -> dict[str, Any]:
        """The one shape clients read (WebSocket, API, client): `step`/`attempt` only for a
        step's events, `lost` only when true."""
        out: dict[str, Any] = {"id": self.id, "event": self.name, "data": self.payload}
        if self.step:
            out["step"], out["attempt"] = self.step, self.attempt
        if self.lost:
            out["lost"] = True
        return out


def lost_attempt_error(reason: str, lost_at: dt.datetime) -> dict[str, Any]:
    """The error recorded for an attempt that a crash, a stop or a store failure cut off."""
    return {
        "name": "AttemptLost",
        "message": f"{reason}; the step runs again",
        "lost_at": lost_at.isoformat(),
    }


LOST_EVENTS = "$lost"


def lost_events_payload(lost: list[tuple[int, str, int]]) -> dict[str, Any]:
    """The `$lost` event's payload for events (id, step, attempt) of cut-off attempts."""
    attempts = sorted({(step, attempt) for _id, step, attempt in lost})
    return {
        "events": [event_id for event_id, _step, _attempt in lost],
        "attempts": [{"step": step, "attempt": attempt} for step, attempt in attempts],
    }  # an event naming events of a lost attempt: `{"events": [ids], "step": ...}`


@dataclass(frozen=True, kw_only=True)
class EventOrigin:
    """The step attempt that broadcast an event while it ran: an attempt that never recorded an
    outcome (its runner crashed, the store failed) is known by it."""

    scope: str
    step: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class StreamChunk:
    """One write to a stream (`workflows.core.streams`), on its way to the store with a commit
    (or, `ephemeral`, to the commit hooks only: connected readers)."""

    stream: str
    data: Any  # JSON-normalized
    origin: EventOrigin
    seq: int
    size: int  # bytes of its JSON text: what the batching and the limits count
    ephemeral: bool = False


# --- What the engine asks a store to write, in one transaction -----------------------------------


@dataclass(kw_only=True)
class EntryWrite:
    id: int | None  # an existing entry to update (a retry, a wait coming true), else a new one
    scope: str
    position: int
    name: str
    kind: str
    status: str
    input: Any = None
    output: Any = None
    error: dict[str, Any] | None = None
    started_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    wake_at: dt.datetime | None = None
    attempts: int = 0
    meta: dict[str, Any] | None = None
    consumes: list[int] = field(default_factory=list)  # message ids this queue wait takes
    # Not stored: the trace contexts their senders stored with them, for observers (trace links).
    consumed_contexts: list[dict[str, str]] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class AttemptWrite:
    number: int
    started_at: dt.datetime
    finished_at: dt.datetime
    outcome: str  # ok | error | timeout | critical
    error: dict[str, Any] | None = None
    delay: float | None = None  # seconds before the next attempt, when one follows
    retry_at: dt.datetime | None = None


@dataclass(frozen=True, kw_only=True)
class OutgoingMessage:
    """A message to store; the target is a run id, or a (workflow, key) created when missing."""

    queue: str
    body: Any
    run_id: str | None = None
    workflow: str | None = None
    key: list[str] | None = None
    version: str = ""
    initial_state: dict[str, Any] | None = None
    # Dropped, not refused, when the target run has ended: a child's end reported to a parent that
    # is gone (cancelled, failed) must not fail the child's own last commit.
    drop_if_ended: bool = False
    # The priority the target run takes (None: it keeps its own); a run this message creates
    # starts in `concurrency_group`.
    priority: int | None = None
    concurrency_group: str | None = None
    trace_context: dict[str, str] | None = None  # the sender's; also the created run's


@dataclass(frozen=True, kw_only=True)
class ChildStart:
    """A child run to create with the commit that records the parent's `ctx.child` entry, so the
    child exists exactly when that entry does, whatever crashes between."""

    workflow: str
    key: list[str]
    version: str
    initial_state: dict[str, Any]
    parent_queue: str  # where the child reports its end to the parent
    trace_context: dict[str, str] | None = None  # the parent's: the child continues its trace
    priority: int = 0
    concurrency_group: str | None = None  # the child's group (its workflow's concurrency)


CHILD_QUEUE_PREFIX = "$child:"  # internal queues: a user's queue name never starts with "$"


@dataclass(frozen=True, kw_only=True)
class Transition:
    """The run's new status: waiting (until wake_at or a message), or terminal, or released."""

    status: str
    wake_at: dt.datetime | None = None
    wait_queues: tuple[str, ...] | None = None  # waiting on these queues (() = every queue)
    result: Any = None
    error: dict[str, Any] | None = None


@dataclass(kw_only=True)
class Commit:
    entries: list[tuple[EntryWrite, AttemptWrite | None]] = field(default_factory=list)
    state: dict[str, Any] | None = None  # the new state (a snapshot), only when it changed
    events: list[tuple[str, Any]] = field(default_factory=list)  # the body's, on_error's: once each
    live_events: list[tuple[str, Any, EventOrigin]] = field(default_factory=list)  # from running steps
    # Chunks running steps wrote to streams; an ephemeral one is never stored, only handed to the
    # commit hooks (the live pages), in a commit of its own that writes nothing.
    stream_chunks: list[StreamChunk] = field(default_factory=list)
    messages: list[OutgoingMessage] = field(default_factory=list)
    children: list[ChildStart] = field(default_factory=list)  # child runs to create (ctx.child)
    complete: list[tuple[int, Any]] = field(default_factory=list)  # (message id, response)
    prune: list[str] = field(default_factory=list)  # scopes to delete, with the scopes under them
    transition: Transition | None = None
    # A transaction step's body (`ctx.transaction`): the store calls it inside this commit's own
    # database transaction, after the fence and before the entries, so what it writes commits with
    # them or not at all. Its failure comes back as TransactionBodyFailed, nothing written.
    in_transaction: Callable[[], None] | None = None


@dataclass(frozen=True, kw_only=True)
class CommitResult:
    entry_ids: list[int]
    cancel_requested: bool = False
    # An operator paused the run, or its workflow, since it was claimed: the runner stops driving
    # it at its next entry and hands it back (paused, or pending while its workflow is paused).
    hold: bool = False


@dataclass(frozen=True, kw_only=True)
class Audit:
    """Who repairs a run and why: written with the repair, in its transaction."""

    actor: str
    reason: str = ""
    bulk_operation: int | None = None  # the bulk operation it is part of, named in the entry's details

    def __post_init__(self) -> None:
        # Refused when it is made, so every store and every caller (API, admin, CLI) refuses
        # text PostgreSQL cannot store before the repair writes anything.
        check_text(self.actor, "the operator's name")
        check_text(self.reason, "the reason")


@dataclass(frozen=True, kw_only=True)
class AuditRecord:
    run_id: str
    action: str
    actor: str
    reason: str
    details: dict[str, Any]
    created_at: dt.datetime


class _NotEdited:
    def __repr__(self) -> str:
        return "NOT_EDITED"


NOT_EDITED: Any = _NotEdited()  # a replay that keeps the step's recorded input
