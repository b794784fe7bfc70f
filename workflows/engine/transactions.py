"""Transaction steps (`ctx.transaction`): a step whose body is sync ORM code run by the store
inside the very transaction that records the step, so its writes to the project's own tables and
the step's record commit together or not at all. Once recorded it never runs again: a replay
returns the recorded value, which makes its database effects exactly-once.

The body runs in the store's database thread, inside the commit, after the run's fence: a lost
lease runs nothing. A failure inside it (an exception, a value that cannot be recorded, a query
to another database) rolls everything back and is recorded, in a commit of its own, as the step's
failed attempt, retried by its policy. No timeout applies: a sync body inside a transaction
cannot be cut off safely. It is a `step` entry (meta `{"transaction": true}`), so the history
does not tell it apart from a plain step of the same name.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from ..core.exceptions import (
    BadInput,
    CriticalError,
    RetryAfter,
    RunFinished,
    RunNotFound,
    TransactionBodyFailed,
)
from ..core.jsonvalue import normalize
from ..core.recorder import StepRecorder
from ..core.records import AttemptWrite, Commit, EntryKind, EntryStatus, EntryWrite, Outcome
from ..core.replay import Action
from ..core.retry import RetryPolicy
from .step_context import StepContext
from .steps import _record_failure, _Tried, enter_step

TRANSACTION_META = {"transaction": True}  # what the entry's meta says (the inspector shows it)


async def transaction(
    ex: StepRecorder,
    scope: str,
    name: str,
    fn: Callable[[StepContext], Any],
    input: Any,
    *,
    max_retries: int,
    retry_backoff_base: float,
    retry_backoff_max: float,
) -> Any:
    """`ctx.transaction`: the replay decision first (a recorded value returns, `fn` never runs),
    then one attempt: `fn` inside the commit of its record, or its failure recorded apart."""
    if inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None)):  # noqa: B004
        raise BadInput(
            f"transaction step {name!r}: fn must be a plain (sync) function; it runs Django ORM "
            "code inside the database transaction that records the step"
        )
    policy = RetryPolicy(
        max_retries=max_retries,
        backoff_base=retry_backoff_base,
        backoff_max=retry_backoff_max,
        retry_on_timeout=False,
    )
    decision = enter_step(ex, scope, name, input)
    if decision.action == Action.REPLAY:
        return decision.value

    attempt, input = decision.attempt, decision.input
    ex.check_lease()  # nothing starts on a lease that may have lapsed
    started = ex.clock.now()
    step_ctx = StepContext(ex, name, input, attempt, scope)
    entry = EntryWrite(
        id=decision.entry_id, scope=scope, position=decision.position, name=name, kind=EntryKind.STEP,
        status=EntryStatus.COMPLETED, input=input, started_at=decision.started_at or started,
        attempts=attempt, meta=dict(TRANSACTION_META),
    )  # fmt: skip
    # The messages `fn` sends are written after it, in the same transaction (this very list).
    commit = Commit(entries=[(entry, None)], messages=step_ctx.messages)
    commit.in_transaction = _body(ex, commit, entry, step_ctx, fn, started)
    outcome, retry_after = Outcome.ERROR, None
    failure: Exception
    try:
        await ex.commit(commit)
        return entry.output
    except TransactionBodyFailed as exc:
        failure = exc.error
        if isinstance(failure, CriticalError | BadInput):
            outcome = Outcome.CRITICAL
        elif isinstance(failure, RetryAfter):
            retry_after = failure.seconds
    except (RunFinished, RunNotFound) as exc:  # a message of it went to a run that is gone
        outcome, failure = Outcome.CRITICAL, exc
    finished = ex.clock.now()
    entry.output, entry.finished_at = None, finished
    entry.attempts, entry.id = attempt, decision.entry_id
    tried = _Tried(entry, step_ctx, started, finished, outcome, failure, retry_after)
    await _record_failure(ex, policy, tried)


def _body(
    ex: StepRecorder,
    commit: Commit,
    entry: EntryWrite,
    step_ctx: StepContext,
    fn: Callable[[StepContext], Any],
    started: Any,
) -> Callable[[], None]:
    """What the store calls inside the commit's transaction (in its database thread): `fn`, then
    its value and its attempt set on the entry the same commit writes next."""

    def body() -> None:
        output = normalize(fn(step_ctx), f"the output of step {entry.name!r}")
        if step_ctx.state_touched and step_ctx.state != step_ctx.initial_state:
            raise BadInput(
                f"transaction step {entry.name!r} changed step.state: a transaction step cannot "
                "write the run's state; return a value and set ctx.state from it"
            )
        finished = ex.clock.now()
        entry.output, entry.finished_at = output, finished
        attempt = AttemptWrite(
            number=entry.attempts, started_at=started, finished_at=finished, outcome=Outcome.OK
        )
        commit.entries[:] = [(w, attempt if w is entry else a) for w, a in commit.entries]

    return body
