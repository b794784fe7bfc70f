"""What "start a run" says, as one value: every way a run comes to be (a client's start, a
runner's start, a child, a message to a missing key, a schedule's fire) builds a `NewRun`, and
every store takes it, so the list of a new run's fields is written once."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from .records import ChildStart, OutgoingMessage
from .schedules import RunStart


@dataclass(frozen=True, kw_only=True)
class NewRun:
    """A run to create (or find, when its workflow already has a run of `key`), as of `now`.
    `trace_context`, `priority`, `concurrency_group`, the parent link and `first_message` are kept
    with a run created from it only."""

    workflow: str
    key: list[str]
    version: str
    initial_state: dict[str, Any]
    now: dt.datetime
    trace_context: dict[str, str] | None = None
    priority: int = 0
    concurrency_group: str | None = None
    first_message: OutgoingMessage | None = None  # stored with a run this creates, in its transaction
    parent_id: str | None = None
    parent_queue: str | None = None  # where a child reports its end to its parent

    @classmethod
    def of_child(cls, start: ChildStart, *, parent_id: str, now: dt.datetime) -> NewRun:
        """A child run, created with the parent's commit that records it."""
        return cls(
            workflow=start.workflow, key=start.key, version=start.version,
            initial_state=start.initial_state, now=now, trace_context=start.trace_context,
            priority=start.priority, concurrency_group=start.concurrency_group,
            parent_id=parent_id, parent_queue=start.parent_queue,
        )  # fmt: skip

    @classmethod
    def of_message(cls, outgoing: OutgoingMessage, now: dt.datetime) -> NewRun:
        """The run a message to a (workflow, key) without a run creates."""
        assert outgoing.workflow is not None and outgoing.key is not None  # not a message by run id
        return cls(
            workflow=outgoing.workflow, key=outgoing.key, version=outgoing.version,
            initial_state=outgoing.initial_state or {}, now=now, trace_context=outgoing.trace_context,
            priority=outgoing.priority or 0, concurrency_group=outgoing.concurrency_group,
        )  # fmt: skip

    @classmethod
    def of_fire(cls, start: RunStart, now: dt.datetime) -> NewRun:
        """One run of a schedule's fire."""
        return cls(
            workflow=start.workflow, key=start.key, version=start.version,
            initial_state=start.initial_state, now=now, priority=start.priority,
            concurrency_group=start.concurrency_group,
        )  # fmt: skip

    def but(self, **changes: Any) -> NewRun:
        """A copy with `changes` (e.g. the starter's trace context, known only inside its span)."""
        return replace(self, **changes)
