"""The step primitive: run a function once, record its JSON result with the state it wrote and
its attempt in one commit, retry it by the policy, and return the record on every replay.

A slow step is marked `running` in the store after STEP_MARK_AFTER seconds, so the inspector
shows it while it runs; fast steps never pay for that marker.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..core.exceptions import BadInput, CriticalError, RetryAfter, RunFinished, RunNotFound, StepFailed
from ..core.jsonvalue import normalize
from ..core.limits import Limiter
from ..core.recorder import Recorder, StepRecorder
from ..core.records import AttemptWrite, Commit, EntryKind, EntryStatus, EntryWrite, Outcome
from ..core.replay import Action, Decision
from ..core.retry import RetryPolicy, check_on_exhausted
from ..core.signals import Aborted, Suspend
from ..core.values import ErrorEvent, StepErrorInfo, error_info
from .lost_attempts import give_up_after_lost_attempts as _give_up_after_lost_attempts
from .step_context import StepContext, call_on_error

STEP_MARK_AFTER = 0.5  # seconds a step runs before it is marked `running` in the store
LONGEST_HOLD = 3600.0  # seconds: how long a limiter slot of a step with no timeout may be held
HOLD_MARGIN = 60.0  # seconds a limiter slot outlives its attempt's timeout (a dead runner's slot)


class StepTimeout(Exception):
    pass


def enter_step(ex: StepRecorder, scope: str, name: str, input: Any) -> Decision:
    """A step's entry decided against the history: REPLAY (the caller returns the record), or
    one to run now; a terminal failure raises StepFailed, a backoff not over yet Suspend."""
    if input is not None:
        input = normalize(input, f"the input of step {name!r}")
    decision = ex.enter(scope, name, EntryKind.STEP, input=input)
    if decision.action == Action.RAISE:
        raise StepFailed(name, decision.error.get("kind", "exhausted"), decision.error)
    if decision.action == Action.WAIT:
        raise Suspend(decision.until)  # its backoff is not over (an early wake)
    return decision


async def step(
    ex: StepRecorder,
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
    limit: str | None = None,
    on_exhausted: str | None = None,
) -> Any:
    """`ctx.step`: the replay decision first (a recorded result returns at once), then one attempt
    (`_attempt`) and its record: the result, or the failure with its retry or its end."""
    limiter = ex.limiter(limit) if limit is not None else None  # BadInput: unknown name
    if rollback is not None and not ex.has_checkpoint:
        raise BadInput(f"step {name!r} has a rollback: call `await ctx.rollback_checkpoint(...)` before it")
    policy = RetryPolicy(
        max_retries=max_retries,
        backoff_base=retry_backoff_base,
        backoff_max=retry_backoff_max,
        retry_on_timeout=retry_on_timeout,
        on_exhausted=str(on_exhausted or getattr(getattr(ex, "definition", None), "on_exhausted", "fail")),
    )
    check_on_exhausted(policy.on_exhausted)
    decision = enter_step(ex, scope, name, input)
    if decision.action == Action.REPLAY:
        if rollback is not None:
            ex.add_rollback(name, rollback, decision.value)
        return decision.value

    attempt, input = decision.attempt, decision.input
    held = decision.recorded is not None and bool((decision.recorded.error or {}).get("paused"))
    if attempt > policy.max_retries + 1 and not held:  # lost attempts used up its retries (held: resumed)
        await _give_up_after_lost_attempts(
            ex, scope, name, decision.position, decision.entry_id, input, attempt
        )
    ex.check_lease()  # nothing starts on a lease that may have lapsed (a paused or cut-off runner)
    slot = None
    if limiter is not None:
        slot = await _admit(
            ex, limiter, scope, name, decision.position, decision.entry_id, input, attempt, timeout
        )
        try:
            ex.check_lease()  # the admission may have waited
        except BaseException:
            await ex.release_limit(slot, {})
            raise
    tried = await _attempt(ex, decision, name, fn, input, attempt, timeout, slot)
    if tried.failure is None:
        try:
            await _record_success(ex, tried)
        except (RunFinished, RunNotFound) as exc:
            # A message of this step went to a run that is gone: the step fails as itself, at once.
            tried.outcome, tried.failure, tried.entry.output = Outcome.CRITICAL, exc, None
        else:
            if rollback is not None:
                ex.add_rollback(name, rollback, tried.output)
            return tried.output
    await _record_failure(ex, policy, tried)


@dataclass
class _Tried:
    """One attempt of a step body, ready to record: its entry, outcome and timing."""

    entry: EntryWrite
    step_ctx: StepContext
    started: dt.datetime
    finished: dt.datetime
    outcome: Outcome = Outcome.OK
    failure: Exception | None = None
    retry_after: float | None = None
    output: Any = None


async def _attempt(
    ex: StepRecorder,
    decision: Decision,
    name: str,
    fn: Callable[[StepContext], Any],
    input: Any,
    attempt: int,
    timeout: float,
    slot: int | None,
) -> _Tried:
    """Run the body once (marked `running` if it is slow), release its limiter slot, and settle
    the entry its record writes; the record itself is the caller's."""
    scope = decision.scope
    started = ex.clock.now()
    first_started = decision.started_at or started
    step_ctx = StepContext(ex, name, input, attempt, scope)
    outcome, retry_after = Outcome.OK, None
    failure: Exception | None = None
    output = None
    marker = RunningMarker(
        ex,
        EntryWrite(
            id=decision.entry_id, scope=scope, position=decision.position, name=name, kind=EntryKind.STEP,
            status=EntryStatus.RUNNING, input=input, started_at=first_started, attempts=attempt - 1,
        ),
    )  # fmt: skip
    step_ctx.mark_running = marker.now  # a stored chunk of a cut-off attempt counts it as lost
    try:
        output = await call_with_timeout(fn, step_ctx, timeout, ex.sync_step_runner)
        output = normalize(output, f"the output of step {name!r}")
        if step_ctx.state_touched:
            step_ctx.state = normalize(step_ctx.state, f"the state written by step {name!r}")
    except (CriticalError, BadInput) as exc:
        outcome, failure = Outcome.CRITICAL, exc
    except StepTimeout as exc:
        outcome, failure = Outcome.TIMEOUT, exc
    except RetryAfter as exc:
        outcome, failure, retry_after = Outcome.ERROR, exc, exc.seconds
    except Exception as exc:
        outcome, failure = Outcome.ERROR, exc
    except asyncio.CancelledError:  # a lost race, a stopping runner: no marker after the fact
        marker.abandon()
        step_ctx.close_streams()
        if slot is not None:
            await ex.release_limit(slot, step_ctx.meta)
        raise
    finished = ex.clock.now()
    step_ctx.close_streams()
    if slot is not None:  # charged what the attempt recorded, before its record commits
        await ex.release_limit(slot, step_ctx.meta)
    meta = None
    try:
        meta = normalize(step_ctx.meta, f"the meta of step {name!r}") or None
    except BadInput as exc:
        outcome, failure = Outcome.CRITICAL, failure or exc
    await ex.drain_live_events()  # what the step broadcast and streamed is stored before its record
    entry = EntryWrite(
        id=await marker.settle(decision.entry_id), scope=scope, position=decision.position, name=name,
        kind=EntryKind.STEP, status=EntryStatus.COMPLETED, input=input, started_at=first_started,
        finished_at=finished, attempts=attempt, meta=meta,
    )  # fmt: skip
    return _Tried(entry, step_ctx, started, finished, outcome, failure, retry_after, output)


async def _record_success(ex: StepRecorder, tried: _Tried) -> None:
    """The step's result, its state changes, its messages and its attempt: one commit."""
    entry, step_ctx = tried.entry, tried.step_ctx
    entry.output = tried.output
    attempt = AttemptWrite(
        number=entry.attempts, started_at=tried.started, finished_at=tried.finished, outcome=Outcome.OK
    )
    commit = Commit(entries=[(entry, attempt)], messages=step_ctx.messages)
    previous = None
    if step_ctx.state_touched:
        previous = dict(ex.state)  # enough to undo: _apply_changes only sets and pops top-level keys
        _apply_changes(ex.state, step_ctx.initial_state or {}, step_ctx.state)
    try:
        await ex.commit(commit)
    except BaseException:
        if previous is not None:  # not stored: the live state goes back too
            ex.state.clear()
            ex.state.update(previous)
        raise


async def _record_failure(ex: StepRecorder, policy: RetryPolicy, tried: _Tried) -> None:
    """A failed attempt: tell on_error, record it, then wait for the retry or fail for good."""
    entry, outcome, failure = tried.entry, tried.outcome, tried.failure
    assert failure is not None
    attempt = entry.attempts
    decision = policy.decide(attempt, outcome, tried.retry_after)
    error = error_info(failure)
    retry_at = None
    if decision.will_retry:
        base = tried.finished if tried.retry_after is not None else tried.started
        retry_at = base + dt.timedelta(seconds=decision.delay or 0)
    info = StepErrorInfo(
        step_name=entry.name,
        attempt=attempt,
        max_retries=policy.max_retries,
        remaining_retries=policy.remaining_after(attempt),
        will_retry=decision.will_retry,
        retry_delay=decision.delay,
        retry_at=retry_at,
        error=error,
    )
    c = call_on_error(ex, ErrorEvent(rollback=info) if ex.compensating else ErrorEvent(step=info))
    held = decision.kind == "exhausted" and policy.on_exhausted == "pause" and not ex.compensating
    if held:  # out of retries: the run is paused, its step due for one more attempt on resume
        retry_at, entry.status, entry.error = tried.finished, EntryStatus.RETRYING, {**error, "paused": True}
        entry.wake_at, entry.error["kind"] = retry_at, "exhausted"
    elif decision.will_retry:
        entry.status, entry.wake_at, entry.error = EntryStatus.RETRYING, retry_at, error
    else:
        entry.status, entry.error = EntryStatus.FAILED, {**error, "kind": decision.kind}
    attempt_write = AttemptWrite(
        number=attempt,
        started_at=tried.started,
        finished_at=tried.finished,
        outcome=outcome,
        error=error,
        delay=decision.delay,
        retry_at=retry_at,
    )
    commit = Commit(entries=[(entry, attempt_write)])
    if c is not None:
        commit.events.extend(c.events)
        ex.state.clear()
        ex.state.update(c.state)
    await ex.commit(commit)
    if held:
        ex.hold_exhausted(entry.name)
    if decision.will_retry or held:
        raise Suspend(retry_at)
    raise StepFailed(entry.name, decision.kind or "exhausted", entry.error)


async def _admit(
    ex: StepRecorder,
    limiter: Limiter,
    scope: str,
    name: str,
    position: int,
    entry_id: int | None,
    input: Any,
    attempt: int,
    timeout: float,
) -> int:
    """Take a slot of the step's limiter, or wait for one durably: the entry is recorded as
    waiting for the limiter (no attempt spent) and the run suspends until the limiter may admit
    it, holding nothing. Returns the slot to release after the attempt."""
    now = ex.clock.now()
    # A slot whose runner dies mid-attempt stops counting once the attempt would have timed out.
    hold = dt.timedelta(seconds=(timeout or LONGEST_HOLD) + HOLD_MARGIN)
    grant = await ex.acquire_limit(
        limiter, holder=f"{ex.run.id}:{scope}/{name}#{attempt}", expires_at=now + hold
    )
    if grant.slot is not None:
        return grant.slot
    assert grant.retry_at is not None
    waiting = {"limiter": limiter.name, "limits": limiter.describe(), "reason": grant.reason,
               "until": grant.retry_at.isoformat()}  # fmt: skip
    ex.add_pending(
        EntryWrite(
            id=entry_id, scope=scope, position=position, name=name, kind=EntryKind.STEP,
            status=EntryStatus.WAITING, input=input, wake_at=grant.retry_at, attempts=attempt - 1,
            meta={"waiting_for": waiting},
        )
    )  # fmt: skip
    raise Suspend(grant.retry_at)


class RunningMarker:
    """Marks a step `running` in the store once it has run STEP_MARK_AFTER seconds, so the
    inspector shows a slow step (a model call) while it runs. Fast steps never pay for it: the
    timer is cancelled before it fires, and the step's record is its one commit."""

    def __init__(self, execution: Recorder, write: EntryWrite) -> None:
        self._ex = execution
        self._write = write
        self._task: asyncio.Task[int | None] | None = None  # the marker's commit, once started
        self._timer = asyncio.get_running_loop().call_later(STEP_MARK_AFTER, self._start)

    def _start(self) -> None:
        self._task = asyncio.create_task(self._mark())

    def now(self) -> None:
        """Mark it at once, before the step's first stored stream chunk: chunks of an attempt a
        crash then cuts off belong to an attempt the store records as lost, so the rerun writes
        its own as the next attempt. Commits go in order: the mark is stored before the chunks."""
        if self._task is None and not self._timer.cancelled():
            self._timer.cancel()
            self._start()

    async def _mark(self) -> int | None:
        try:
            result = await self._ex.commit(Commit(entries=[(self._write, None)]))
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


SyncStepRunner = Callable[[Callable[[StepContext], Any], StepContext], Any]


def run_sync_step(fn: Callable[[StepContext], Any], step: StepContext) -> Any:
    """How a sync step body runs in its worker thread when nothing else is configured."""
    return fn(step)


async def call_with_timeout(
    fn: Callable[[StepContext], Any],
    step: StepContext,
    timeout: float,
    sync_runner: SyncStepRunner = run_sync_step,
) -> Any:
    """Run a step body; a timed-out async body is cancelled. A sync body runs in a worker thread
    through `sync_runner` (the Django app's closes stale database connections around it)."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        call = fn(step)
    else:
        call = asyncio.to_thread(sync_runner, fn, step)
    if not timeout:
        result = await call
    else:
        try:
            async with asyncio.timeout(timeout) as scope:
                result = await call
        except TimeoutError:
            if scope.expired():
                raise StepTimeout(f"step {step.name!r} timed out after {timeout:g}s") from None
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
