"""One execution of one run: replay the body against its history, run what is new, commit each
entry as it completes, and end in a transition (completed, failed, waiting, cancelled, released).

A run that never waits goes straight through in one execution, one commit per step. Waits unwind
the body with `Suspend`; the next execution replays it from the top over the recorded history.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import inspect
import json
import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .clock import Clock
from .context import (
    ErrorContext,
    ErrorEvent,
    Message,
    RunContext,
    StepContext,
    StepErrorInfo,
    WorkflowErrorInfo,
)
from .definition import Registry, Workflow, validate_key
from .exceptions import (
    BadInput,
    CriticalError,
    DuplicateEntryName,
    HistoryDiverged,
    LeaseLost,
    NotRecordable,
    RetryAfter,
    StepFailed,
)
from .jsonvalue import dumps, normalize
from .records import (
    AttemptWrite,
    Commit,
    CommitResult,
    EntryKind,
    EntryRecord,
    EntryStatus,
    EntryWrite,
    OutgoingMessage,
    RunRecord,
    RunStatus,
    Transition,
)
from .replay import History, Slot
from .retry import RetryPolicy
from .store import Store

logger = logging.getLogger("workflows.executor")

ROLLBACK_SCOPE = "~rollback"  # compensations are recorded steps in a scope of their own
ROLLBACK_OPTIONS = {
    "timeout": 30,
    "retry_on_timeout": True,
    "max_retries": 3,
    "retry_backoff_base": 0.5,
    "retry_backoff_max": 30.0,
}
SETTLED = (EntryStatus.COMPLETED, EntryStatus.FAILED)
STEP_MARK_AFTER = 0.5  # seconds a step runs before it is marked `running` in the store


class _Unwind(BaseException):
    """Leaves the workflow body without running user `except Exception` handlers."""


class Suspend(_Unwind):
    def __init__(self, wake_at: dt.datetime | None, wait_queues: tuple[str, ...] | None = None) -> None:
        self.wake_at = wake_at
        self.wait_queues = wait_queues


class Cancelled(_Unwind):
    pass


class Interrupted(_Unwind):
    """The runner is stopping: give the run back at its next entry."""


class Aborted(_Unwind):
    """The lease was lost: another runner owns the run now; write nothing more."""


@dataclass(frozen=True)
class Outcome:
    status: str  # completed | failed | waiting | cancelled | released | lost
    wake_at: dt.datetime | None = None


def error_info(exc: BaseException) -> dict[str, Any]:
    return {
        "name": type(exc).__name__,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
    }


class Execution:
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
    ) -> None:
        self.run = run
        self.definition = definition
        self.registry = registry
        self.history = History(run.id, history)
        self.store = store
        self.clock = clock
        self.owner = owner
        self.state: dict[str, Any] = copy.deepcopy(run.state)
        self._committed_state = dumps(self.state, "the run's state")
        self._pending = Commit()
        self._on_commit = on_commit
        self.cancel_requested = run.cancel_requested
        self.interrupt_requested = False
        self.fatal: BaseException | None = None
        self._rollbacks: list[tuple[str, Callable[..., Any], Any]] = []  # (step, rollback fn, output)
        self._checkpoint = False
        self._compensating = False
        self._rollback_failures: list[dict[str, Any]] = []
        self._commit_lock = asyncio.Lock()
        self._live_events: list[tuple[str, Any]] = []
        self._live_flusher: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: int | None = None

    # --- the whole execution ---------------------------------------------------------------------

    async def execute(self) -> Outcome:
        self._loop, self._loop_thread = asyncio.get_running_loop(), threading.get_ident()
        ctx = RunContext(self)
        try:
            try:
                result = await self.definition.run(ctx)
                if self.fatal is not None:
                    raise self.fatal
                self.history.check_finished("")
                result = normalize(result, "the workflow's result")
            except Cancelled:
                await self._compensate()
                return await self._end(Transition(status=RunStatus.CANCELLED), "cancelled")
            except _Unwind:
                raise
            except Exception as exc:
                failure = self.fatal or exc
                if self.fatal is None:  # a diverged history must not run code's compensations
                    await self._compensate()
                return await self._fail(failure)
        except Suspend as s:
            transition = Transition(status=RunStatus.WAITING, wake_at=s.wake_at, wait_queues=s.wait_queues)
            return await self._end(transition, "waiting", s.wake_at)
        except Interrupted:
            return await self._end(Transition(status=RunStatus.PENDING, wake_at=self.clock.now()), "released")
        except Aborted:
            return Outcome("lost")
        except Cancelled:  # raised again while compensating: already compensating, just end
            return await self._end(Transition(status=RunStatus.CANCELLED), "cancelled")
        return await self._end(Transition(status=RunStatus.COMPLETED, result=result), "completed")

    async def _compensate(self) -> None:
        """Run the rollbacks of completed steps in reverse order, each a recorded step in the
        `~rollback` scope: a crash mid-way resumes without running a finished rollback twice."""
        if not self._rollbacks:
            return
        self._compensating = True
        failures = []
        for name, fn, output in reversed(self._rollbacks):

            async def undo(step: StepContext, fn=fn, output=output) -> Any:
                result = fn(step, output)
                return await result if inspect.isawaitable(result) else result

            try:
                await self.step(ROLLBACK_SCOPE, name, undo, None, **ROLLBACK_OPTIONS)
            except StepFailed as exc:
                failures.append({"step": name, "kind": exc.kind, "message": exc.error.get("message")})
        self._rollback_failures = failures

    async def _end(self, transition: Transition, status: str, wake_at: dt.datetime | None = None) -> Outcome:
        try:
            await self._commit(Commit(transition=transition))
        except Aborted:
            return Outcome("lost")
        return Outcome(status, wake_at)

    async def _fail(self, exc: BaseException) -> Outcome:
        error = error_info(exc)
        if isinstance(exc, StepFailed):
            error["step"], error["kind"] = exc.step_name, exc.kind
        if self._rollbacks:
            error["rollback"] = {"ran": len(self._rollbacks), "failed": self._rollback_failures}
        commit = Commit(transition=Transition(status=RunStatus.FAILED, error=error))
        c = self._call_on_error(ErrorEvent(workflow=WorkflowErrorInfo(error=error)))
        if c is not None:
            commit.events.extend(c.events)
            self.state.clear()
            self.state.update(c.state)
        try:
            self._state_change()
        except NotRecordable:  # the body left a state that cannot be stored: keep the last good one
            self.state.clear()
            self.state.update(json.loads(self._committed_state))
        try:
            await self._commit(commit)
        except Aborted:
            return Outcome("lost")
        return Outcome("failed")

    # --- events a step broadcasts, stored at once -------------------------------------------------

    def broadcast_live(self, event: str, payload: Any) -> None:
        """From a step (async, or sync in a worker thread): store the event now, in a commit of
        its own, so followers see progress during a slow call rather than after it. Events are
        observations: they stay even when the attempt then fails."""
        payload = self.validate_event(event, payload)
        if threading.get_ident() == self._loop_thread:
            self._queue_live(event, payload)
        else:
            self._loop.call_soon_threadsafe(self._queue_live, event, payload)

    def _queue_live(self, event: str, payload: Any) -> None:
        self._live_events.append((event, payload))
        if self._live_flusher is None or self._live_flusher.done():
            self._live_flusher = asyncio.create_task(self._flush_live_events())

    async def _flush_live_events(self) -> None:
        while self._live_events:
            batch, self._live_events = self._live_events, []
            try:
                await self._commit(Commit(events=batch))
            except Aborted:  # the lease is gone: the step's own commit will find out
                return

    async def _drain_live_events(self) -> None:
        if self._live_flusher is not None:
            await self._live_flusher

    # --- committing ------------------------------------------------------------------------------

    def _state_change(self) -> str | None:
        """The state as JSON when it differs from the last one committed, else None."""
        encoded = dumps(self.state, "the run's state")
        return None if encoded == self._committed_state else encoded

    def _add_pending(self, write: EntryWrite) -> None:
        """An entry written with the next commit. The history sees it at once, so a branch that
        re-runs its scope before that commit finds it (one write per slot, the latest)."""
        slot = (write.scope, write.position)
        self._pending.entries = [(w, a) for w, a in self._pending.entries if (w.scope, w.position) != slot]
        self._pending.entries.append((write, None))
        self.history.record(_record_of(write, write.id))

    async def _commit(self, commit: Commit) -> CommitResult:
        """Flush pending body-level writes with `commit`, in one transaction. One commit of a run
        at a time, its state read under the lock: concurrent branches never store an older state
        after a newer one, whatever thread the store runs each commit in."""
        async with self._commit_lock:
            return await self._commit_locked(commit)

    async def _commit_locked(self, commit: Commit) -> CommitResult:
        pending, self._pending = self._pending, Commit()
        slots = {(w.scope, w.position) for w, _a in commit.entries}
        commit.entries[:0] = [(w, a) for w, a in pending.entries if (w.scope, w.position) not in slots]
        commit.events[:0] = pending.events
        commit.complete[:0] = pending.complete
        encoded = self._state_change()
        if encoded is not None:
            # A snapshot: the store may serialize it in another thread while branches go on.
            commit.state = json.loads(encoded)
        try:
            result = await self.store.acommit(
                run_id=self.run.id, owner=self.owner, commit=commit, now=self.clock.now()
            )
        except LeaseLost:
            raise Aborted() from None
        if encoded is not None:
            self._committed_state = encoded
        for (write, _attempt), entry_id in zip(commit.entries, result.entry_ids, strict=True):
            self.history.record(_record_of(write, entry_id))
        for scope in commit.prune:
            self.history.forget(scope)
        if result.cancel_requested:
            self.cancel_requested = True
        if self._on_commit is not None:
            self._on_commit(commit)
        return result

    # --- entries ---------------------------------------------------------------------------------

    def _enter(self, scope: str, name: str, kind: str) -> Slot:
        """Check the entry against the history. A cancel or stop takes effect here, at the first
        entry not already settled: replaying recorded entries costs nothing and lets
        compensation know every completed step."""
        if self.fatal is not None:
            raise self.fatal
        try:
            slot = self.history.enter(scope, name, kind)
        except (HistoryDiverged, DuplicateEntryName) as exc:
            self.fatal = exc
            raise
        settled = slot.recorded is not None and slot.recorded.status in SETTLED
        if not settled and not self._compensating:
            if self.cancel_requested:
                raise Cancelled()
            if self.interrupt_requested:
                raise Interrupted()
        return slot

    async def step(
        self,
        scope: str,
        name: str,
        fn: Callable[[StepContext], Any],
        input: Any,
        *,
        timeout: float,
        retry_on_timeout: bool,
        max_retries: int,
        retry_backoff_base: float,
        retry_backoff_max: float,
        rollback: Callable[..., Any] | None = None,
    ) -> Any:
        if rollback is not None and not self._checkpoint:
            raise BadInput(
                f"step {name!r} has a rollback: call `await ctx.rollback_checkpoint(...)` before it"
            )
        policy = RetryPolicy(
            max_retries=max_retries,
            backoff_base=retry_backoff_base,
            backoff_max=retry_backoff_max,
            retry_on_timeout=retry_on_timeout,
        )
        if input is not None:
            input = normalize(input, f"the input of step {name!r}")
        slot = self._enter(scope, name, EntryKind.STEP)
        recorded = slot.recorded
        attempt, entry_id, first_started = 1, None, None
        if recorded is not None:
            if recorded.status == EntryStatus.COMPLETED:
                if rollback is not None:
                    self._rollbacks.append((name, rollback, recorded.output))
                return recorded.output
            if recorded.status == EntryStatus.FAILED:
                error = recorded.error or {}
                raise StepFailed(name, error.get("kind", "exhausted"), error, replayed=True)
            if recorded.wake_at is not None and recorded.wake_at > self.clock.now():
                raise Suspend(recorded.wake_at)  # backoff not over (an early wake)
            # RETRYING, or RUNNING: an attempt a crash cut short (it left no attempt record)
            attempt, entry_id, first_started = recorded.attempts + 1, recorded.id, recorded.started_at
            input = recorded.input  # an operator may have edited it before a rerun

        started = self.clock.now()
        step_ctx = StepContext(self, name, input, attempt)
        outcome, retry_after, failure = "ok", None, None
        output, meta = None, None
        marker = _RunningMarker(
            self,
            EntryWrite(
                id=entry_id, scope=scope, position=slot.position, name=name, kind=EntryKind.STEP,
                status=EntryStatus.RUNNING, input=input, started_at=first_started or started,
                attempts=attempt - 1,
            ),
        )  # fmt: skip
        try:
            output = await _call_with_timeout(fn, step_ctx, timeout)
            output = normalize(output, f"the output of step {name!r}")
            if step_ctx.state_touched:
                step_ctx.state = normalize(step_ctx.state, f"the state written by step {name!r}")
        except (CriticalError, BadInput) as exc:
            outcome, failure = "critical", exc
        except _StepTimeout as exc:
            outcome, failure = "timeout", exc
        except RetryAfter as exc:
            outcome, failure, retry_after = "error", exc, exc.seconds
        except Exception as exc:
            outcome, failure = "error", exc
        except asyncio.CancelledError:  # a lost race, a stopping runner: no marker after the fact
            marker.abandon()
            raise
        finished = self.clock.now()
        try:
            meta = normalize(step_ctx.meta, f"the meta of step {name!r}") or None
        except BadInput as exc:
            outcome, failure = "critical", failure or exc
        await self._drain_live_events()  # what the step broadcast is stored before its record
        entry_id = await marker.settle(entry_id)

        entry = EntryWrite(
            id=entry_id,
            scope=scope,
            position=slot.position,
            name=name,
            kind=EntryKind.STEP,
            status=EntryStatus.COMPLETED,
            input=input,
            started_at=first_started or started,
            finished_at=finished,
            attempts=attempt,
            meta=meta,
        )
        if failure is None:
            entry.output = output
            commit = Commit(
                entries=[
                    (
                        entry,
                        AttemptWrite(number=attempt, started_at=started, finished_at=finished, outcome="ok"),
                    )
                ],
                messages=step_ctx.messages,
            )
            previous = None
            if step_ctx.state_touched:
                previous = copy.deepcopy(self.state)
                _apply_changes(self.state, step_ctx.initial_state, step_ctx.state)
            try:
                await self._commit(commit)
            except BaseException:
                if previous is not None:  # not stored: the live state goes back too
                    self.state.clear()
                    self.state.update(previous)
                raise
            if rollback is not None:
                self._rollbacks.append((name, rollback, output))
            return output

        decision = policy.decide(attempt, outcome, retry_after)
        error = error_info(failure)
        retry_at = None
        if decision.will_retry:
            base = finished if retry_after is not None else started
            retry_at = base + dt.timedelta(seconds=decision.delay or 0)
        info = StepErrorInfo(
            step_name=name,
            attempt=attempt,
            max_retries=max_retries,
            remaining_retries=policy.remaining_after(attempt),
            will_retry=decision.will_retry,
            retry_delay=decision.delay,
            retry_at=retry_at,
            error=error,
        )
        c = self._call_on_error(ErrorEvent(rollback=info) if self._compensating else ErrorEvent(step=info))
        if decision.will_retry:
            entry.status, entry.wake_at, entry.error = EntryStatus.RETRYING, retry_at, error
        else:
            entry.status, entry.error = EntryStatus.FAILED, {**error, "kind": decision.kind}
        attempt_write = AttemptWrite(
            number=attempt,
            started_at=started,
            finished_at=finished,
            outcome=outcome,
            error=error,
            delay=decision.delay,
            retry_at=retry_at,
        )
        commit = Commit(entries=[(entry, attempt_write)])
        if c is not None:
            commit.events.extend(c.events)
            self.state.clear()
            self.state.update(c.state)
        await self._commit(commit)
        if decision.will_retry:
            raise Suspend(retry_at)
        raise StepFailed(name, decision.kind or "exhausted", entry.error)

    async def sleep(
        self, scope: str, name: str, *, seconds: float | None = None, until: dt.datetime | None = None
    ) -> None:
        if until is not None and (until.tzinfo is None):
            raise ValueError(f"sleep_until {name!r}: give an aware datetime (with a timezone)")
        slot = self._enter(scope, name, EntryKind.SLEEP)
        recorded = slot.recorded
        now = self.clock.now()
        if recorded is not None and recorded.status == EntryStatus.COMPLETED:
            return
        if recorded is not None:
            wake = recorded.wake_at or now
        else:
            wake = until if until is not None else now + dt.timedelta(seconds=max(0.0, float(seconds or 0)))
        entry = EntryWrite(
            id=recorded.id if recorded else None,
            scope=scope,
            position=slot.position,
            name=name,
            kind=EntryKind.SLEEP,
            status=EntryStatus.WAITING,
            input=recorded.input if recorded else {"until": wake.isoformat()},
            started_at=recorded.started_at if recorded else now,
            wake_at=wake,
        )
        if now >= wake:
            entry.status, entry.finished_at = EntryStatus.COMPLETED, now
            self._add_pending(entry)
            return
        if recorded is None:
            self._add_pending(entry)
        raise Suspend(wake)

    async def queue_wait(
        self,
        scope: str,
        name: str,
        names: list[str] | None,
        *,
        count: int,
        timeout: float | None,
        completable: bool,
    ) -> list[Message]:
        for queue_name in names or []:
            self.definition.queue_spec(queue_name, self.run.workflow)
        slot = self._enter(scope, name, EntryKind.QUEUE)
        recorded = slot.recorded
        if recorded is not None and recorded.status == EntryStatus.COMPLETED:
            return self._messages(recorded.output, completable)
        now = self.clock.now()
        if recorded is not None:
            deadline, started = recorded.wake_at, recorded.started_at
        else:
            deadline = now + dt.timedelta(seconds=max(0.0, timeout)) if timeout is not None else None
            started = now
        entry = EntryWrite(
            id=recorded.id if recorded else None,
            scope=scope,
            position=slot.position,
            name=name,
            kind=EntryKind.QUEUE,
            status=EntryStatus.WAITING,
            input={"queues": names, "count": count, "timeout": timeout, "completable": completable},
            started_at=started,
            wake_at=deadline,
        )
        available = await self.store.aavailable_messages(self.run.id, names, count)
        if available or (deadline is not None and now >= deadline):
            entry.status, entry.finished_at = EntryStatus.COMPLETED, now
            entry.output = {
                "messages": [
                    {"id": m.id, "queue": m.queue, "body": m.body, "sent_at": m.sent_at.isoformat()}
                    for m in available
                ]
            }
            entry.consumes = [m.id for m in available]
            commit = Commit(entries=[(entry, None)])
            if not completable:  # a sender waiting for a reply gets None rather than a timeout
                commit.complete = [(m.id, None) for m in available]
            await self._commit(commit)
            return self._messages(entry.output, completable)
        if recorded is None:
            self._add_pending(entry)
        raise Suspend(deadline, tuple(names) if names else ())

    def _messages(self, output: Any, completable: bool) -> list[Message]:
        return [
            Message(
                id=m["id"],
                queue=m["queue"],
                body=m["body"],
                sent_at=m["sent_at"],
                completable=completable,
                _complete=self._complete_message,
            )
            for m in (output or {}).get("messages", [])
        ]

    async def _complete_message(self, message_id: int, response: Any) -> None:
        response = normalize(response, f"the response to message {message_id}")
        await self._commit(Commit(complete=[(message_id, response)]))

    # --- markers: checkpoints and versions ----------------------------------------------------------

    async def rollback_checkpoint(self, scope: str, name: str) -> None:
        slot = self._enter(scope, name, EntryKind.CHECKPOINT)
        if slot.recorded is None:
            now = self.clock.now()
            self._add_pending(self._marker(slot, name, EntryKind.CHECKPOINT, None, now))
        self._checkpoint = True

    async def get_version(self, scope: str, name: str, latest: int) -> int:
        """The version this run took at this gate. A run whose history passed this point before
        the gate existed gets 0 (the original code); a new run records `latest`."""
        if not isinstance(latest, int) or latest < 1:
            raise BadInput(f"get_version {name!r}: latest must be an int >= 1")
        ahead = self.history.peek(scope)
        if ahead is not None and not (ahead.kind == EntryKind.VERSION and ahead.name == name):
            return 0
        slot = self._enter(scope, name, EntryKind.VERSION)
        if slot.recorded is not None:
            return int(slot.recorded.output)
        self._add_pending(self._marker(slot, name, EntryKind.VERSION, latest, self.clock.now()))
        return latest

    async def removed(self, scope: str, name: str, kind: str) -> None:
        """Retire an entry: runs that recorded it skip over it; new runs record nothing."""
        if kind not in EntryKind.ALL:
            raise BadInput(f"removed {name!r}: unknown kind {kind!r}")
        ahead = self.history.peek(scope)
        if ahead is not None and ahead.name == name and ahead.kind == kind:
            self.history.skip(scope)

    def _marker(self, slot: Slot, name: str, kind: str, output: Any, now: dt.datetime) -> EntryWrite:
        return EntryWrite(
            id=None,
            scope=slot.scope,
            position=slot.position,
            name=name,
            kind=kind,
            status=EntryStatus.COMPLETED,
            output=output,
            started_at=now,
            finished_at=now,
        )

    # --- effects from the body -------------------------------------------------------------------

    def broadcast_from_body(self, scope: str, event: str, payload: Any) -> None:
        payload = self.validate_event(event, payload)
        if not self.history.replaying(scope):
            self._pending.events.append((event, payload))

    def validate_event(self, event: str, payload: Any) -> Any:
        spec = self.definition.event_spec(event, self.run.workflow)
        return spec.validate(f"event {self.run.workflow}.{event}", payload)

    def outgoing(self, queue: str, body: Any, workflow: str | None, key: list[str] | None) -> OutgoingMessage:
        if workflow is None and key is None:
            spec = self.definition.queue_spec(queue, self.run.workflow)
            return OutgoingMessage(
                queue=queue,
                body=spec.validate(f"queue {self.run.workflow}.{queue}", body),
                run_id=self.run.id,
            )
        if workflow is None or key is None:
            raise BadInput("send to another run needs both workflow= and key=")
        target = self.registry.get(workflow)
        key = validate_key(key)
        spec = target.queue_spec(queue, workflow)
        return OutgoingMessage(
            queue=queue,
            body=spec.validate(f"queue {workflow}.{queue}", body),
            workflow=workflow,
            key=key,
            version=target.version,
            initial_state=target.initial_state(),
        )

    def _call_on_error(self, event: ErrorEvent) -> ErrorContext | None:
        handler = self.definition.on_error
        if handler is None:
            return None
        c = ErrorContext(self, copy.deepcopy(self.state))
        try:
            result = handler(c, event)
            if inspect.isawaitable(result):
                # on_error is meant to be quick bookkeeping; an async one is run to completion here.
                raise TypeError("on_error must be a plain function, not async")
            c.state = normalize(c.state, "the state written by on_error")
        except Exception:
            logger.exception("on_error of %s raised; ignored", self.run.workflow)
            return None
        return c


class _StepTimeout(Exception):
    pass


class _RunningMarker:
    """Marks a step `running` in the store once it has run STEP_MARK_AFTER seconds, so the
    inspector shows a slow step (a model call) while it runs. Fast steps never pay for it: the
    timer is cancelled before it fires, and the step's record is its one commit."""

    def __init__(self, execution: Execution, write: EntryWrite) -> None:
        self._ex = execution
        self._write = write
        self._task: asyncio.Task[int | None] | None = None  # the marker's commit, once started
        self._timer = asyncio.get_running_loop().call_later(STEP_MARK_AFTER, self._start)

    def _start(self) -> None:
        self._task = asyncio.create_task(self._mark())

    async def _mark(self) -> int | None:
        try:
            result = await self._ex._commit(Commit(entries=[(self._write, None)]))
        except Aborted:
            return None
        return result.entry_ids[0]

    def abandon(self) -> None:
        self._timer.cancel()  # a commit already started is left to finish: it writes a true record

    async def settle(self, entry_id: int | None) -> int | None:
        """The entry id the step's record must update (the marker's, when it was written)."""
        self._timer.cancel()
        if self._task is None:
            return entry_id
        marked = await self._task
        return marked if marked is not None else entry_id


async def _call_with_timeout(fn: Callable[[StepContext], Any], step: StepContext, timeout: float) -> Any:
    """Run a step body; a timed-out async body is cancelled. A sync body runs in a thread."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        call = fn(step)
    else:
        call = asyncio.to_thread(fn, step)
    if not timeout:
        result = await call
    else:
        try:
            async with asyncio.timeout(timeout) as scope:
                result = await call
        except TimeoutError:
            if scope.expired():
                raise _StepTimeout(f"step {step.name!r} timed out after {timeout:g}s") from None
            raise
    if inspect.isawaitable(result):
        result = await result
    return result


def _apply_changes(state: dict[str, Any], before: dict[str, Any], after: dict[str, Any]) -> None:
    """Apply what a step changed (top-level keys) to the live state: concurrent branches that
    write different keys do not overwrite each other."""
    for key in before.keys() - after.keys():
        state.pop(key, None)
    for key, value in after.items():
        if key not in before or before[key] != value:
            state[key] = value


def _record_of(write: EntryWrite, entry_id: int | None) -> EntryRecord:
    return EntryRecord(
        id=entry_id,
        scope=write.scope,
        position=write.position,
        name=write.name,
        kind=write.kind,
        status=write.status,
        input=write.input,
        output=write.output,
        error=write.error,
        started_at=write.started_at,
        finished_at=write.finished_at,
        wake_at=write.wake_at,
        attempts=write.attempts,
        meta=write.meta,
    )
