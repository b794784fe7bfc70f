"""One execution of one run: replay the body against its history, run what is new, commit each
entry as it completes, and end in a transition (completed, failed, waiting, cancelled, released).

A run that never waits goes straight through in one execution, one commit per step. Waits unwind
the body with `Suspend`; the next execution replays it from the top over the recorded history.

The primitives (steps, waits, markers, flow, children) see it as a `core.recorder.BodyRecorder`:
`enter` (the replay decision, plus cancel and stop), `commit` / `add_pending` (the commit
pipeline), the store's answers they need; what it shares with a dry replay is `body.RunBody`'s.
"""

from __future__ import annotations

import datetime as dt
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..core.clock import Clock
from ..core.exceptions import (
    NotRecordable,
    RunNotFound,
    StepFailed,
    StoreUnavailable,
)
from ..core.jsonvalue import normalize
from ..core.limits import Grant, Limiter, tokens_used
from ..core.records import (
    TERMINAL,
    ChildStart,
    Commit,
    CommitResult,
    EntryRecord,
    EntryWrite,
    EventOrigin,
    MessageRecord,
    RunRecord,
    RunStatus,
    Transition,
)
from ..core.replay import Decision
from ..core.signals import Abandoned, Aborted, Cancelled, Interrupted, Suspend, Unwind
from ..core.values import ErrorEvent, WorkflowErrorInfo, error_info
from ..storage.base import Store
from .body import RunBody
from .children import cancel_live_children, report_to_parent
from .commits import CommitPipeline
from .context import RunContext
from .definition import Workflow
from .registry import Registry
from .step_context import StepContext, call_on_error
from .steps import SyncStepRunner, run_sync_step, step
from .streams import StreamWriter

logger = logging.getLogger(__name__)
steps_logger = logging.getLogger("workflows.engine.steps")  # where a limiter's failures were always logged

ROLLBACK_SCOPE = "~rollback"  # compensations are recorded steps in a scope of their own
ROLLBACK_OPTIONS = {
    "timeout": 30,
    "retry_on_timeout": True,
    "max_retries": 3,
    "retry_backoff_base": 0.5,
    "retry_backoff_max": 30.0,
}


@dataclass(frozen=True)
class Ended:
    """How an execution ended (not how one attempt of a step did: that is core.records.Outcome)."""

    status: str  # completed | failed | waiting | cancelled | released | lost | abandoned
    wake_at: dt.datetime | None = None


class Execution(RunBody):
    def __init__(
        self,
        *,
        run: RunRecord,
        definition: Workflow,
        registry: Registry,
        history: list[EntryRecord],
        store: Store,
        clock: Clock,
        owner: str,
        on_commit: Callable[[Commit], None] | None = None,
        sync_step_runner: SyncStepRunner = run_sync_step,
        messages: list[MessageRecord] | None = None,
        lease_held: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(
            run=run,
            definition=definition,
            registry=registry,
            history=history,
            clock=clock,
            sync_step_runner=sync_step_runner,
        )
        self.store = store
        self.owner = owner
        self.interrupt_requested = False
        self._cancel_requested = run.cancel_requested
        self._rollback_failures: list[dict[str, Any]] = []
        self._on_commit = on_commit  # the runner's observers: told of each commit once
        self._pipeline: CommitPipeline | None = None
        # The run's unconsumed messages as read with its history (None: not read): a message read
        # before this execution's first commit (a wait the replay reaches at once, the common way
        # a message wakes a run) uses them instead of asking the store. Only this execution
        # consumes them (its lease), and a message that arrives after that read is not missed: a
        # run that suspends to wait is woken again when one is already there.
        self._resume_messages = messages
        # Whether the runner surely still holds the run's lease (`leases.LeaseWatch`): asked
        # before a step body starts. None: always (a test driving the engine directly).
        self._lease_held = lease_held
        self.lease_doubted = False  # check_lease found the lease may have lapsed
        self.exhausted_steps: list[str] = []  # out of retries with on_exhausted="pause" (hold_exhausted)

    # --- the whole execution ---------------------------------------------------------------------

    async def execute(self) -> Ended:
        self.pipeline  # noqa: B018 - made here, on the loop's thread, before a step thread needs it
        try:
            return await self._execute()
        finally:  # an early commit has landed or failed before the execution is over
            await self.pipeline.settled()

    async def _execute(self) -> Ended:
        try:
            try:
                result = await self.definition.run(self.context(""))
                self.raise_if_fatal()
                self.history.check_finished("")
                result = normalize(result, "the workflow's result")
            except Cancelled:
                await cancel_live_children(self)
                await self._compensate()
                return await self._end(Transition(status=RunStatus.CANCELLED), "cancelled")
            except Unwind:
                raise
            except Exception as exc:
                failure = self.fatal or exc
                if self.fatal is None:  # a diverged history must not run code's compensations
                    await self._compensate()
                return await self._fail(failure)
        except Suspend as s:
            if self.exhausted_steps:  # `on_exhausted="pause"`: held for an operator
                return await self._end(Transition(status=RunStatus.PAUSED, wake_at=s.wake_at), "paused")
            transition = Transition(status=RunStatus.WAITING, wake_at=s.wake_at, wait_queues=s.wait_queues)
            return await self._end(transition, "waiting", s.wake_at)
        except Interrupted:
            return await self._end(Transition(status=RunStatus.PENDING, wake_at=self.clock.now()), "released")
        except Aborted:
            return Ended("lost")
        except Abandoned:
            return Ended("abandoned")
        except Cancelled:  # raised again while compensating: already compensating, just end
            return await self._end(Transition(status=RunStatus.CANCELLED), "cancelled")
        return await self._end(Transition(status=RunStatus.COMPLETED, result=result), "completed")

    def context(self, scope: str) -> RunContext:
        """`ctx` for the body (scope "") or for a branch, loop iteration or block."""
        return RunContext(self, scope)

    async def _compensate(self) -> None:
        """Run the rollbacks of completed steps in reverse order, each a recorded step in the
        `~rollback` scope: a crash mid-way resumes without running a finished rollback twice."""
        if not self._rollbacks:
            return
        self.compensating = True
        failures = []
        for name, fn, output in reversed(self._rollbacks):

            async def undo(step_ctx: StepContext, fn: Callable[..., Any] = fn, output: Any = output) -> Any:
                result = fn(step_ctx, output)
                return await result if inspect.isawaitable(result) else result

            try:
                await step(self, ROLLBACK_SCOPE, name, undo, None, **ROLLBACK_OPTIONS)  # type: ignore[arg-type]
            except StepFailed as exc:
                failures.append({"step": name, "kind": exc.kind, "message": exc.error.get("message")})
        self._rollback_failures = failures

    async def _end(self, transition: Transition, status: str, wake_at: dt.datetime | None = None) -> Ended:
        commit = Commit(transition=transition)
        if transition.status in TERMINAL:  # a child tells its parent, in its last commit
            commit.messages = report_to_parent(self.run, transition.status, transition.result)
        try:
            await self.commit(commit)
        except Aborted:
            return Ended("lost")
        except Abandoned:
            return Ended("abandoned")
        return Ended(status, wake_at)

    async def _fail(self, exc: BaseException) -> Ended:
        error = error_info(exc)
        if self._rollbacks:
            error["rollback"] = {"ran": len(self._rollbacks), "failed": self._rollback_failures}
        try:
            await cancel_live_children(self)
        except Abandoned:
            return Ended("abandoned")
        commit = Commit(transition=Transition(status=RunStatus.FAILED, error=error))
        commit.messages = report_to_parent(self.run, RunStatus.FAILED, error=error)
        c = call_on_error(self, ErrorEvent(workflow=WorkflowErrorInfo(error=error)))
        if c is not None:
            commit.events.extend(c.events)
            self.state.clear()
            self.state.update(c.state)
        try:
            self.pipeline.state_change()
        except NotRecordable:  # the body left a state that cannot be stored: keep the last good one
            self.pipeline.restore_committed_state()
        try:
            await self.commit(commit)
        except Aborted:
            return Ended("lost")
        except Abandoned:
            return Ended("abandoned")
        return Ended("failed")

    # --- the interface of the primitives ----------------------------------------------------------

    @property
    def pipeline(self) -> CommitPipeline:
        """Made on first use, inside the event loop the execution runs on."""
        if self._pipeline is None:
            self._pipeline = CommitPipeline(
                run_id=self.run.id,
                owner=self.owner,
                store=self.store,
                clock=self.clock,
                history=self.history,
                state=self.state,
                on_commit=self._on_commit,
            )
        return self._pipeline

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested or (self._pipeline is not None and self._pipeline.cancel_requested)

    def request_cancel(self) -> None:
        """An operator cancelled the run (seen by the runner's heartbeat): stop at the next entry."""
        self._cancel_requested = True

    def enter(self, scope: str, name: str, kind: str, *, input: Any = None) -> Decision:
        """The replay decision for the next entry of `scope`. A cancel or stop takes effect here,
        at the first entry not already settled: replaying recorded entries costs nothing and lets
        compensation know every completed step."""
        decision = self.decide(scope, name, kind, input)
        if not decision.settled and not self.compensating:
            if self.cancel_requested:
                raise Cancelled()
            elif self.interrupt_requested or (self._pipeline is not None and self._pipeline.hold):
                raise Interrupted()  # handed back: paused when an operator paused the run
        return decision

    def hold_exhausted(self, step: str) -> None:
        """A step out of retries with `on_exhausted="pause"`: the run ends this execution paused
        (its suspension becomes a pause), its step due for one more attempt when resumed."""
        self.exhausted_steps.append(step)

    def check_lease(self) -> None:
        """Before a step body starts: a runner that cannot be sure it still holds the run (it was
        paused or cut off past its lease) abandons the execution, as a commit refused for a lost
        lease does, instead of running the body beside the runner that took the run over."""
        if self._lease_held is not None and not self._lease_held():
            self.lease_doubted = True
            raise Aborted()

    def commit(self, commit: Commit) -> Awaitable[CommitResult]:
        """Write `commit` with the body's pending writes, in one transaction (Aborted: lease lost).
        Returns the pipeline's awaitable itself: no extra coroutine on the hot path."""
        return self.pipeline.commit(commit)

    def commit_early(self, commit: Commit) -> bool:
        """Send `commit` without waiting for it, when the pipeline allows (`CommitPipeline.
        commit_early`); False: the caller commits it as usual."""
        if not self.pipeline.can_commit_early():
            return False
        self.pipeline.commit_early(commit)
        return True

    async def available_messages(self, queues: list[str] | None, limit: int) -> list[MessageRecord]:
        """The run's unconsumed messages on `queues` (a read inside the body: a store failure
        abandons the execution rather than failing the run)."""
        if self._resume_messages is not None and not self.pipeline.commits:  # read with the history
            read, self._resume_messages = self._resume_messages, None
            return [m for m in read if not queues or m.queue in queues][:limit]
        await self.pipeline.settled()  # a wait's early commit took its messages: not seen twice
        try:
            return await self.store.aavailable_messages(self.run.id, queues, limit)
        except StoreUnavailable as exc:
            raise Abandoned() from exc

    def add_pending(self, write: EntryWrite) -> None:
        """An entry (a marker, a wait) written with the next commit."""
        self.pipeline.add_pending(write)

    def add_pending_child(self, write: EntryWrite, start: ChildStart) -> None:
        self.pipeline.add_pending_child(write, start)

    def drain_live_events(self) -> Awaitable[None]:
        return self.pipeline.drain_live_events()

    # --- effects from the body -------------------------------------------------------------------

    def broadcast_from_body(self, scope: str, event: str, payload: Any) -> None:
        payload = self.validate_event(event, payload)
        if not self.history.replaying(scope):
            self.pipeline.add_pending_event(event, payload)

    def broadcast_live(self, event: str, payload: Any, origin: EventOrigin) -> None:
        self.pipeline.broadcast_live(event, self.validate_event(event, payload), origin)

    def open_stream(
        self, origin: EventOrigin, name: str, *, stored: Callable[[], None] | None = None
    ) -> StreamWriter:
        return StreamWriter(self.pipeline.streams, origin, name, stored=stored)

    # --- what the primitives ask of the store ---------------------------------------------------

    async def acquire_limit(self, limiter: Limiter, *, holder: str, expires_at: dt.datetime) -> Grant:
        """A slot of `limiter`, or when one may be free (a store failure abandons the execution)."""
        try:
            return await self.store.aacquire_limit(
                limiter, holder=holder, expires_at=expires_at, now=self.clock.now()
            )
        except StoreUnavailable as exc:
            raise Abandoned() from exc

    async def release_limit(self, slot: int, meta: Any) -> None:
        """Give back a limiter slot, charged the tokens `meta` records; left to expire when the
        store is away."""
        try:
            await self.store.arelease_limit(slot, tokens=tokens_used(meta), now=self.clock.now())
        except StoreUnavailable:  # the slot stops counting when it expires
            steps_logger.warning(
                "run %s: could not release limiter slot %s; it expires on its own", self.run.id, slot
            )

    async def find_run(self, workflow: str, key: list[str]) -> RunRecord | None:
        try:
            return await self.store.afind_run(workflow, key)
        except RunNotFound:
            return None
        except StoreUnavailable as exc:
            raise Abandoned() from exc

    async def cancel_run(self, run_id: str) -> None:
        try:
            await self.store.arequest_cancel(run_id, now=self.clock.now())
        except StoreUnavailable as exc:
            raise Abandoned() from exc
