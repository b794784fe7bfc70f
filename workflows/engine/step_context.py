"""What a step body and `on_error` see: `step` and `c`. They hold no logic of their own."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..core.idempotency import step_idempotency_key
from ..core.jsonvalue import copy_json, normalize
from ..core.recorder import StepRecorder
from ..core.records import EventOrigin, OutgoingMessage
from ..core.values import ErrorEvent

if TYPE_CHECKING:
    from .streams import StreamWriter

logger = logging.getLogger("workflows.engine.execution")  # where on_error's failures were always logged


class StepContext:
    """`step`: what a step body sees. Its state is a private copy, kept only if the attempt succeeds."""

    def __init__(self, execution: StepRecorder, name: str, input: Any, attempt: int, scope: str = "") -> None:
        self._ex = execution
        self.name = name
        self.scope = scope
        self.input = input
        self.attempt = attempt
        self._state: dict[str, Any] | None = None  # copied on first use: most steps never touch it
        self.initial_state: dict[str, Any] | None = None
        self.meta: dict[str, Any] = {}  # recorded with the step (e.g. {"usage": {...}} of a model call)
        self.messages: list[OutgoingMessage] = []
        self.queue = StepQueue(execution, self.messages)
        self._stream: StreamWriter | None = None  # opened on first use: most steps stream nothing
        self.mark_running: Callable[[], None] | None = None  # before its first stored chunk (steps.py)

    @property
    def state(self) -> dict[str, Any]:
        """The run's state as this attempt sees it; its changes commit only if the attempt succeeds."""
        if self._state is None:
            self.initial_state = copy_json(self._ex.state)
            self._state = copy_json(self.initial_state)
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

    @property
    def idempotency_key(self) -> str:
        """Pass it to external APIs: the same for every attempt and crash-restart of this step's
        record, new when an operator replays this step or one before it."""
        run = self._ex.run
        return step_idempotency_key(run.id, run.epoch, self.scope, self.name)

    @property
    def stream(self) -> StreamWriter:
        """This attempt's writer of the step's own stream (named after the step):
        `await step.stream.write(chunk)`; `step.stream("name", ephemeral=True)` for another."""
        if self._stream is None:
            origin = EventOrigin(scope=self.scope, step=self.name, attempt=self.attempt)
            self._stream = self._ex.open_stream(origin, self.name, stored=self.mark_running)
        return self._stream

    def close_streams(self) -> None:
        """The attempt ended: a later write raises StreamClosed."""
        if self._stream is not None:
            self._stream.close()

    def broadcast(self, event: str, payload: Any = None) -> None:
        """Push an event at once (stored and sent while the step still runs), marked with this
        attempt: if a crash cuts the attempt off, the event is marked lost before the step reruns."""
        self._ex.broadcast_live(
            event, payload, EventOrigin(scope=self.scope, step=self.name, attempt=self.attempt)
        )


class StepQueue:
    """`step.queue.send(...)`: messages that leave with the step's result, or not at all."""

    def __init__(self, execution: StepRecorder, messages: list[OutgoingMessage]) -> None:
        self._ex = execution
        self._messages = messages  # the step's: they commit with its result

    def send(
        self, queue: str, body: Any = None, *, workflow: str | None = None, key: list[str] | None = None
    ) -> None:
        """Send to this run's `queue`, or to the run of (`workflow`, `key`), created when missing."""
        self._messages.append(self._ex.outgoing(queue, body, workflow, key))


class ErrorContext:
    """`c` in on_error: it may write state and broadcast; it commits with the failure's record."""

    def __init__(self, execution: StepRecorder, state: dict[str, Any]) -> None:
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


def call_on_error(ex: StepRecorder, event: ErrorEvent) -> ErrorContext | None:
    """Tell the workflow's on_error (a plain function, checked when the workflow is defined);
    what it wrote commits with the failure's record. An exception in it is logged, not fatal."""
    handler = ex.on_error
    if handler is None:
        return None
    c = ErrorContext(ex, copy_json(ex.state))
    try:
        handler(c, event)
        c.state = normalize(c.state, "the state written by on_error")
    except Exception:
        logger.exception("on_error of %s raised; ignored", ex.run.workflow)
        return None
    return c
