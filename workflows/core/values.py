"""The plain values user code receives from the engine: messages, try and race results, loop
outcomes, what `on_error` is told and what an action sees. Data only: no behaviour of the engine.
"""

from __future__ import annotations

import datetime as dt
import traceback
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from .exceptions import StepFailed
from .jsonvalue import storable_text


def error_info(exc: BaseException) -> dict[str, Any]:
    """An exception as recorded: its name, message and traceback (and a failed step's kind).
    NUL and lone surrogates in its text are written as escapes: a step's error is recorded, not
    refused, however odd the text it carries."""
    info: dict[str, Any] = {
        "name": type(exc).__name__,
        "message": storable_text(str(exc)),
        "traceback": storable_text("".join(traceback.format_exception(exc))),
    }
    if isinstance(exc, StepFailed):
        info["step"], info["kind"] = exc.step_name, exc.kind
    return info


@dataclass(frozen=True)
class Message:
    """A message taken from a queue. A completable one is answered with `await complete(response)`."""

    id: int
    queue: str
    body: Any
    sent_at: str
    completable: bool
    _complete: Callable[[int, Any], Awaitable[None]] | None = None

    @property
    def name(self) -> str:
        """The queue the message came from (the seed's name for it)."""
        return self.queue

    async def complete(self, response: Any = None) -> None:
        if not self.completable or self._complete is None:
            raise RuntimeError(
                f"message {self.id} was not taken with completable=True; it cannot be completed"
            )
        await self._complete(self.id, response)


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
    rollback: StepErrorInfo | None = None


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
