"""`ctx`: the run as its workflow body sees it. Each call is one entry of the history, handed to
the primitive that implements it (steps, waits, markers, flow); this module decides nothing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable
from typing import Any

from ..core.exceptions import BadInput, StepFailed
from ..core.recorder import BodyRecorder
from ..core.values import Failure, Message, RaceResult, TryResult
from . import children, flow, markers, steps, transactions, waits
from .step_context import StepContext


class RunContext:
    """`ctx`: the run seen from its body. Names are history entries, unique per scope."""

    def __init__(self, execution: BodyRecorder, scope: str = "") -> None:
        self._ex = execution
        self._scope = scope
        self.queue = QueueContext(execution, scope)

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(self._ex.run.key)

    @property
    def run_id(self) -> str:
        return self._ex.run.id

    @property
    def workflow_name(self) -> str:
        return self._ex.run.workflow

    @property
    def version(self) -> str:
        return self._ex.run.version

    @property
    def state(self) -> dict[str, Any]:
        """The durable state; changes outside a step commit with the next entry."""
        return self._ex.state

    def broadcast(self, event: str, payload: Any = None) -> None:
        """Push an event; not repeated while the body replays recorded entries."""
        self._ex.broadcast_from_body(self._scope, event, payload)

    async def step(
        self,
        name: str,
        fn: Callable[[StepContext], Any],
        input: Any = None,
        *,
        timeout: float = 30,
        retry_on_timeout: bool = False,
        max_retries: int = 3,
        retry_backoff_base: float = 0.1,
        retry_backoff_max: float = 30.0,
        rollback: Callable[..., Any] | None = None,
        limit: str | None = None,
        on_exhausted: str | None = None,
    ) -> Any:
        """Run `fn(step)` once and record its result (see the options in the README). `limit`
        names a registered `Limiter` the step's attempts share with every other run.
        `on_exhausted` ("fail" or "pause"; default: the workflow's) says what its last failed
        retry does: fail the step, or pause the run for an operator."""
        return await steps.step(
            self._ex,
            self._scope,
            name,
            fn,
            input,
            timeout=timeout,
            retry_on_timeout=retry_on_timeout,
            max_retries=max_retries,
            retry_backoff_base=retry_backoff_base,
            retry_backoff_max=retry_backoff_max,
            rollback=rollback,
            limit=limit,
            on_exhausted=on_exhausted,
        )

    async def transaction(
        self,
        name: str,
        fn: Callable[[StepContext], Any],
        input: Any = None,
        *,
        max_retries: int = 3,
        retry_backoff_base: float = 0.1,
        retry_backoff_max: float = 30.0,
        timeout: None = None,
    ) -> Any:
        """Run `fn(step)`, sync Django ORM code, inside the database transaction that records the
        step: its writes and the record commit together or not at all, and a replay returns the
        recorded value without running it again. An exception in it (or a query to another
        database) rolls it all back and fails the attempt, retried by the options as a step's.
        No timeout: a body inside a transaction cannot be cut off safely."""
        if timeout is not None:
            raise BadInput(
                f"transaction step {name!r}: ctx.transaction takes no timeout (its body runs inside "
                "a database transaction, where it cannot be cut off safely)"
            )
        return await transactions.transaction(
            self._ex,
            self._scope,
            name,
            fn,
            input,
            max_retries=max_retries,
            retry_backoff_base=retry_backoff_base,
            retry_backoff_max=retry_backoff_max,
        )

    async def try_step(
        self, name: str, fn: Callable[[StepContext], Any], input: Any = None, **options: Any
    ) -> TryResult:
        """As `step`, with the same options, but a terminal failure (after its retries) comes back
        as data."""
        try:
            value = await self.step(name, fn, input, **options)
        except StepFailed as exc:
            return TryResult(ok=False, failure=Failure(kind=exc.kind, error=exc.error))
        return TryResult(ok=True, value=value)

    async def try_block(self, name: str, fn: Callable[[RunContext], Awaitable[Any]]) -> TryResult:
        """Run `fn(ctx)` in a scope of its own; a terminal failure inside comes back as data."""
        return await flow.try_block(self._ex, self._scope, name, fn)

    async def join(
        self, name: str, branches: dict[str, Callable[[RunContext], Awaitable[Any]]]
    ) -> dict[str, Any]:
        """Run branches concurrently, each in its own scope; wait for all. Raises JoinError."""
        return await flow.join(self._ex, self._scope, name, branches)

    async def race(
        self, name: str, branches: dict[str, Callable[[RunContext], Awaitable[Any]]]
    ) -> RaceResult:
        """The first branch to succeed wins; the others are cancelled. Raises RaceError."""
        return await flow.race(self._ex, self._scope, name, branches)

    async def loop(
        self,
        name: str,
        fn: Callable[[RunContext, Any], Awaitable[Any]],
        state: Any = None,
        history_size: int | None = 20,
    ) -> Any:
        """A durable loop: `fn(ctx, state)` returns `Loop.next(state)` or `Loop.done(value)`.
        Only the last `history_size` iterations stay in the history (None keeps all)."""
        return await flow.loop(self._ex, self._scope, name, fn, state, history_size)

    async def rollback_checkpoint(self, name: str) -> None:
        """Steps after this point may declare `rollback=`: run in reverse when the run fails for good."""
        await markers.rollback_checkpoint(self._ex, self._scope, name)

    async def get_version(self, name: str, latest: int) -> int:
        """A versioning gate: the version this run took here (0 for runs that predate the gate)."""
        return await markers.get_version(self._ex, self._scope, name, latest)

    async def removed(self, name: str, kind: str = "step") -> None:
        """Retire an entry of old code: runs that recorded it skip it."""
        await markers.removed(self._ex, self._scope, name, kind)

    async def child(
        self, name: str, workflow: str, key: list[str] | tuple[str, ...], input: Any = None
    ) -> Any:
        """Start a run of `workflow` under `key` (once, even across crashes) and wait for its end
        without holding anything. Returns the child's result; raises `ChildFailed` when it failed
        or was cancelled. `input` (JSON) reaches the child as `ctx.state["input"]`."""
        return await children.child(self._ex, self._scope, name, workflow, key, input)

    async def sleep(self, name: str, seconds: float) -> None:
        await waits.sleep(self._ex, self._scope, name, seconds=seconds)

    async def sleep_until(self, name: str, when: dt.datetime) -> None:
        await waits.sleep(self._ex, self._scope, name, until=when)


class QueueContext:
    """`ctx.queue`: durable waits for messages sent to this run."""

    def __init__(self, execution: BodyRecorder, scope: str) -> None:
        self._ex = execution
        self._scope = scope

    async def next(
        self,
        name: str,
        names: list[str] | None = None,
        timeout: float | None = None,
        completable: bool = False,
    ) -> Message | None:
        messages = await waits.queue_wait(
            self._ex, self._scope, name, names, count=1, timeout=timeout, completable=completable
        )
        return messages[0] if messages else None

    async def next_batch(
        self,
        name: str,
        names: list[str] | None = None,
        count: int = 1,
        timeout: float | None = None,
        completable: bool = False,
    ) -> list[Message]:
        if count < 1:
            raise ValueError("count must be >= 1")
        return await waits.queue_wait(
            self._ex, self._scope, name, names, count=count, timeout=timeout, completable=completable
        )
