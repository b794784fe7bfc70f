"""The objects user code touches: `ctx` in a workflow body, `step` in a step, `c` in on_error
and actions, and received messages. They hold no logic of their own: the Execution decides.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .exceptions import StepFailed
from .records import OutgoingMessage

if TYPE_CHECKING:
    from .executor import Execution


class RunContext:
    """`ctx`: the run seen from its body. Names are history entries, unique per scope."""

    def __init__(self, execution: Execution, scope: str = "") -> None:
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
    ) -> Any:
        return await self._ex.step(
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
        from .flow import try_block

        return await try_block(self._ex, self._scope, name, fn)

    async def join(
        self, name: str, branches: dict[str, Callable[[RunContext], Awaitable[Any]]]
    ) -> dict[str, Any]:
        """Run branches concurrently, each in its own scope; wait for all. Raises JoinError."""
        from .flow import join

        return await join(self._ex, self._scope, name, branches)

    async def race(
        self, name: str, branches: dict[str, Callable[[RunContext], Awaitable[Any]]]
    ) -> RaceResult:
        """The first branch to succeed wins; the others are cancelled. Raises RaceError."""
        from .flow import race

        return await race(self._ex, self._scope, name, branches)

    async def loop(
        self,
        name: str,
        fn: Callable[[RunContext, Any], Awaitable[Any]],
        state: Any = None,
        history_size: int | None = 20,
    ) -> Any:
        """A durable loop: `fn(ctx, state)` returns `Loop.next(state)` or `Loop.done(value)`.
        Only the last `history_size` iterations stay in the history (None keeps all)."""
        from .flow import loop

        return await loop(self._ex, self._scope, name, fn, state, history_size)

    async def rollback_checkpoint(self, name: str) -> None:
        """Steps after this point may declare `rollback=`: run in reverse when the run fails for good."""
        await self._ex.rollback_checkpoint(self._scope, name)

    async def get_version(self, name: str, latest: int) -> int:
        """A versioning gate: the version this run took here (0 for runs that predate the gate)."""
        return await self._ex.get_version(self._scope, name, latest)

    async def removed(self, name: str, kind: str = "step") -> None:
        """Retire an entry of old code: runs that recorded it skip it."""
        await self._ex.removed(self._scope, name, kind)

    async def sleep(self, name: str, seconds: float) -> None:
        await self._ex.sleep(self._scope, name, seconds=seconds)

    async def sleep_until(self, name: str, when: dt.datetime) -> None:
        await self._ex.sleep(self._scope, name, until=when)


class QueueContext:
    """`ctx.queue`: durable waits for messages sent to this run."""

    def __init__(self, execution: Execution, scope: str) -> None:
        self._ex = execution
        self._scope = scope

    async def next(
        self,
        name: str,
        names: list[str] | None = None,
        timeout: float | None = None,
        completable: bool = False,
    ) -> Message | None:
        messages = await self._ex.queue_wait(
            self._scope, name, names, count=1, timeout=timeout, completable=completable
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
        return await self._ex.queue_wait(
            self._scope, name, names, count=count, timeout=timeout, completable=completable
        )


@dataclass(frozen=True)
class Message:
    """A message taken from a queue. A completable one is answered with `await complete(response)`."""

    id: int
    queue: str
    body: Any
    sent_at: str
    completable: bool
    _complete: Callable[[int, Any], Awaitable[None]] | None = None

    async def complete(self, response: Any = None) -> None:
        if not self.completable or self._complete is None:
            raise RuntimeError(
                f"message {self.id} was not taken with completable=True; it cannot be completed"
            )
        await self._complete(self.id, response)


class StepContext:
    """`step`: what a step body sees. Its state is a private copy, kept only if the attempt succeeds."""

    def __init__(self, execution: Execution, name: str, input: Any, attempt: int) -> None:
        self._ex = execution
        self.name = name
        self.input = input
        self.attempt = attempt
        self._state: dict[str, Any] | None = None  # copied on first use: most steps never touch it
        self.initial_state: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}  # recorded with the step (e.g. {"usage": {...}} of a model call)
        self.messages: list[OutgoingMessage] = []
        self.queue = StepQueue(self)

    @property
    def state(self) -> dict[str, Any]:
        """The run's state as this attempt sees it; its changes commit only if the attempt succeeds."""
        if self._state is None:
            self.initial_state = copy.deepcopy(self._ex.state)
            self._state = copy.deepcopy(self.initial_state)
        return self._state

    @state.setter
    def state(self, value: dict[str, Any]) -> None:
        self.state  # noqa: B018 - take the initial snapshot first
        self._state = value

    @property
    def state_touched(self) -> bool:
        return self._state is not None

    @property
    def run_id(self) -> str:
        return self._ex.run.id

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(self._ex.run.key)

    def broadcast(self, event: str, payload: Any = None) -> None:
        """Push an event at once (stored and sent while the step still runs)."""
        self._ex.broadcast_live(event, payload)


class StepQueue:
    """`step.queue.send(...)`: messages that leave with the step's result, or not at all."""

    def __init__(self, step: StepContext) -> None:
        self._step = step

    def send(
        self, queue: str, body: Any = None, *, workflow: str | None = None, key: list[str] | None = None
    ) -> None:
        """Send to this run's `queue`, or to the run of (`workflow`, `key`), created when missing."""
        self._step.messages.append(self._step._ex.outgoing(queue, body, workflow, key))


class ErrorContext:
    """`c` in on_error: it may write state and broadcast; it commits with the failure's record."""

    def __init__(self, execution: Execution, state: dict[str, Any]) -> None:
        self._ex = execution
        self.state = state
        self.events: list[tuple[str, Any]] = []

    @property
    def key(self) -> tuple[str, ...]:
        return tuple(self._ex.run.key)

    @property
    def run_id(self) -> str:
        return self._ex.run.id

    def broadcast(self, event: str, payload: Any = None) -> None:
        self.events.append((event, self._ex.validate_event(event, payload)))


@dataclass(frozen=True)
class StepErrorInfo:
    step_name: str
    attempt: int
    max_retries: int
    remaining_retries: int
    will_retry: bool
    retry_delay: float | None  # seconds
    retry_at: dt.datetime | None
    error: dict[str, Any]


@dataclass(frozen=True)
class WorkflowErrorInfo:
    error: dict[str, Any]


@dataclass(frozen=True)
class ErrorEvent:
    """What on_error receives: exactly one of `step`, `workflow`, `rollback` is set."""

    step: StepErrorInfo | None = None
    workflow: WorkflowErrorInfo | None = None
    rollback: Any = None


@dataclass(frozen=True)
class Failure:
    kind: str  # critical | timeout | exhausted | error
    error: dict[str, Any]


@dataclass(frozen=True)
class TryResult:
    """What try_step / try_block return: `ok` with `value`, or not ok with `failure`."""

    ok: bool
    value: Any = None
    failure: Failure | None = None


@dataclass(frozen=True)
class RaceResult:
    winner: str
    value: Any


class Loop:
    """What a loop body returns: `Loop.next(state)` for another iteration, `Loop.done(value)`."""

    @dataclass(frozen=True)
    class Next:
        state: Any

    @dataclass(frozen=True)
    class Done:
        value: Any

    @staticmethod
    def next(state: Any = None) -> Loop.Next:
        return Loop.Next(state)

    @staticmethod
    def done(value: Any = None) -> Loop.Done:
        return Loop.Done(value)


@dataclass(frozen=True)
class ActionContext:
    """`c` in an action: a read-only view of the run."""

    run_id: str
    key: tuple[str, ...]
    status: str
    state: dict[str, Any]
    result: Any
