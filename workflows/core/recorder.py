"""The run as the primitives (steps, waits, markers, flow, children) see it: what they are written
against instead of the engine's `Execution`, so the execution, a dry replay or a test can drive them,
and no primitive imports the class that calls it.

Every primitive does the same three things: ask the replay decision for its entry (`enter`), hand
the history a write that rides with the next commit (`add_pending`), and `commit` what it settled.
The rest is what some primitives need besides, named here so it is all there is:

    Recorder       enter, add_pending, commit (+ commit_early), the run, its clock and history,
                   its messages (queue waits, children, branches waiting in-process), the scope
                   contexts branches run in: waits, flow, markers
    StepRecorder   Recorder + the state a step may change, its lease, its rollbacks (and their
                   checkpoint) and on_error, its live events and messages, its limiter slots:
                   steps, rollback_checkpoint, what a step body sees (engine.step_context)
    ChildRecorder  Recorder + the workflows a child may run, the runs already there: children
    BodyRecorder   StepRecorder + ChildRecorder + the body's own broadcasts: `ctx` (engine.context)

`engine.execution.Execution` is one (it writes through the store); `engine.replayer.DryRun` is
another (it writes nothing and stops where work would start).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from .clock import Clock
from .limits import Grant, Limiter
from .records import (
    ChildStart,
    Commit,
    CommitResult,
    EntryWrite,
    EventOrigin,
    MessageRecord,
    OutgoingMessage,
    RunRecord,
)
from .replay import Decision, History


class Recorder(Protocol):
    """What every primitive needs of the run it records into."""

    @property
    def run(self) -> RunRecord: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def history(self) -> History: ...

    def enter(self, scope: str, name: str, kind: str, *, input: Any = None) -> Decision:
        """The replay decision for the next entry of `scope` (a cancel or stop raises here)."""
        ...

    def add_pending(self, write: EntryWrite) -> None:
        """An entry (a marker, a wait) written with the next commit; the history sees it at once."""
        ...

    def commit(self, commit: Commit) -> Awaitable[CommitResult]:
        """Write `commit` with the pending writes, in one transaction."""
        ...

    def commit_early(self, commit: Commit) -> bool:
        """Send `commit` without waiting for it when that is safe; False: commit it as usual."""
        ...

    def raise_if_fatal(self) -> None:
        """Raise the divergence a branch found: nothing more is recorded after it."""
        ...

    def check_queue(self, queue: str) -> None:
        """Refuse a queue the run's workflow does not declare (UnknownQueue)."""
        ...

    async def available_messages(self, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        """The run's unconsumed messages on `queues` (a store failure abandons the execution)."""
        ...

    def context(self, scope: str) -> Any:
        """`ctx` for a branch, iteration or block opened in `scope`."""
        ...


class StepRecorder(Recorder, Protocol):
    """What a step needs besides: the state, the lease, rollbacks, on_error and what its body sends."""

    @property
    def state(self) -> dict[str, Any]: ...
    @property
    def compensating(self) -> bool: ...

    has_checkpoint: bool  # a rollback checkpoint was passed: steps may declare rollbacks

    @property
    def on_error(self) -> Callable[[Any, Any], Any] | None: ...
    @property
    def sync_step_runner(self) -> Callable[[Callable[[Any], Any], Any], Any]: ...

    def hold_exhausted(self, step: str) -> None: ...
    def check_lease(self) -> None:
        """Raise Aborted when the runner cannot be sure it still holds the run."""
        ...

    def drain_live_events(self) -> Awaitable[None]: ...

    def add_rollback(self, name: str, fn: Callable[..., Any], output: Any) -> None: ...

    def limiter(self, name: str) -> Limiter:
        """The registered limiter a step names (BadInput: none of that name)."""
        ...

    async def acquire_limit(self, limiter: Limiter, *, holder: str, expires_at: dt.datetime) -> Grant: ...

    async def release_limit(self, slot: int, meta: Any) -> None: ...

    def broadcast_live(self, event: str, payload: Any, origin: EventOrigin) -> None: ...

    def open_stream(self, origin: EventOrigin, name: str, *, stored: Callable[[], None] | None = None) -> Any:
        """`step.stream`: a writer of the stream `name` for the attempt `origin` names; `stored`
        is called before the attempt's first stored chunk is queued."""
        ...

    def validate_event(self, event: str, payload: Any) -> Any: ...

    def outgoing(
        self, queue: str, body: Any, workflow: str | None, key: list[str] | None
    ) -> OutgoingMessage: ...


class ChildTarget(Protocol):
    """What a child needs of the workflow it starts (a `Workflow` is one)."""

    @property
    def version(self) -> str: ...

    def initial_state(self) -> dict[str, Any]: ...

    def group(self, name: str, key: Sequence[str]) -> str | None: ...


class ChildRecorder(Recorder, Protocol):
    """What a child entry needs besides: the workflow it starts and the run already there."""

    def target(self, workflow: str) -> ChildTarget:
        """The latest definition of `workflow` (UnknownWorkflow: none of that name)."""
        ...

    async def find_run(self, workflow: str, key: list[str]) -> RunRecord | None:
        """The run of (`workflow`, `key`), None when there is none."""
        ...

    async def cancel_run(self, run_id: str) -> None:
        """Ask run `run_id` to cancel (RunNotFound: it is gone)."""
        ...

    def add_pending_child(self, write: EntryWrite, start: ChildStart) -> None:
        """A `child` entry and the run it starts, written together with the next commit."""
        ...


class BodyRecorder(StepRecorder, ChildRecorder, Protocol):
    """What a workflow body's `ctx` drives: every primitive, and the body's own broadcasts."""

    def broadcast_from_body(self, scope: str, event: str, payload: Any) -> None: ...
