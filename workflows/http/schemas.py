"""The schemas of the generic API (`workflows.http.api`): what comes in, what goes out, and the
one error shape; the routes' response maps (`AUTH`, `NOT_FOUND`, …) are here so each route lists
its answers in one line.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import AfterValidator, ConfigDict, field_validator

from ..core.jsonvalue import unstorable
from ..core.records import RunStatus
from ..engine.client import MAX_DEBOUNCE
from ..masking import mask
from ..reads.runs import MAX_PAGE
from .cost_schemas import RunCostOut, run_cost

MAX_ID = 2**63 - 1  # entry and event ids are 64-bit integers
MAX_WAIT = 300.0  # seconds a `wait=true` send may hold its request at most


# What a run recorded, as every read of the API shows it: secrets masked (workflows.masking, the
# inspector's policy). An action's result is the app's own answer and is not masked.
Masked = Annotated[Any, AfterValidator(mask)]
MaskedDict = Annotated[dict[str, Any] | None, AfterValidator(mask)]


class ErrorBody(Schema):
    code: str = Field(description="Stable, machine-readable: not_found, invalid_request, unauthorized…")
    message: str
    detail: Any = Field(None, description="Field errors of an invalid request, when there are any.")


class ErrorOut(Schema):
    """The one error shape of the whole API."""

    error: ErrorBody


def _refuse_nul(data: Any) -> Any:
    """What PostgreSQL cannot store (NUL, a lone surrogate, too deep a value): a 422 naming the
    field, not a 500."""
    problem = unstorable(data)
    if problem is not None:
        raise ValueError(f"the value {problem}")
    return data


class _NoNul(Schema):
    @field_validator("*")
    @classmethod
    def _no_nul(cls, value: Any) -> Any:
        return _refuse_nul(value)


class _In(_NoNul):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not silently ignored


class StartMessageIn(_In):
    queue: str = Field(description="One of the workflow's queues.")
    body: Any = Field(None, description="JSON; validated by the queue's schema when it has one.")


class StartIn(_In):
    key: list[str] = Field(min_length=1, description="The run's key: the same key is the same run.")
    message: StartMessageIn | None = Field(
        None, description="A first message, stored with the run when this call creates it."
    )
    state: dict[str, Any] | None = Field(
        None,
        description="Merged over the workflow's initial state of a run this call creates (or, with"
        " `debounce`, of the run it pushes back).",
    )
    on_conflict: Literal["existing", "replace"] = Field(
        "existing",
        description="When the key already has a run: `existing` returns it (200); `replace` asks it to"
        " cancel, detaches it from the key and starts a new run under the key (201).",
    )
    debounce: float | None = Field(
        None,
        gt=0,
        le=MAX_DEBOUNCE,
        description="Seconds: the run starts this long after the last start of its key; a start that"
        " comes before it has started pushes it back and replaces its `state` (200).",
    )
    priority: int = Field(
        0,
        ge=-100,
        le=100,
        strict=True,
        description="-100 to 100: runners claim runs of higher priority first, FIFO within one (a"
        " run this call creates).",
    )


class RunSummaryOut(Schema):
    id: uuid.UUID
    workflow: str
    key: list[str]
    version: str
    status: str = Field(description="pending, running, waiting, completed, failed or cancelled.")
    error: MaskedDict
    cancel_requested: bool
    created_at: dt.datetime
    updated_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    wake_at: dt.datetime | None = Field(description="When a runner next looks at the run.")
    priority: int = Field(description="Claims take higher priority first, FIFO within one.")
    concurrency_group: str | None = Field(
        description="The concurrency group the run counts in (its workflow's `concurrency`), if any."
    )


class RunOut(RunSummaryOut):
    state: Annotated[dict[str, Any], AfterValidator(mask)]
    result: Masked
    forked_from: uuid.UUID | None = Field(
        None, description="A fork: the run whose history it was started from."
    )
    forked_from_entry: int | None = Field(
        None, description="A fork: the entry of that run it ran fresh from."
    )

    @staticmethod
    def resolve_forked_from(run) -> uuid.UUID | None:
        return getattr(run, "forked_from_id", None)

    @staticmethod
    def resolve_forked_from_entry(run) -> int | None:
        return getattr(run, "forked_from_entry", None)


class AttemptOut(Schema):
    number: int
    started_at: dt.datetime
    finished_at: dt.datetime
    outcome: str = Field(description="ok, error, timeout or critical.")
    error: MaskedDict = Field(description="name, message and traceback of a failure.")
    delay: float | None = Field(description="Seconds waited before the next attempt.")
    retry_at: dt.datetime | None


class StepOut(Schema):
    id: int
    scope: str
    position: int
    name: str
    kind: str = Field(description="step, sleep, queue, join, race, loop, try, checkpoint, version…")
    status: str = Field(description="completed, failed, retrying or waiting.")
    input: Masked
    output: Masked
    error: MaskedDict
    meta: MaskedDict = Field(description="Recorded by the step, e.g. a model call's usage.")
    attempt_count: int
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    wake_at: dt.datetime | None = Field(description="Retry due, sleep end or wait deadline.")
    superseded: bool = Field(description="Replaced by an operator's replay; kept as history.")
    attempts: list[AttemptOut]

    @staticmethod
    def resolve_attempt_count(entry) -> int:
        return entry.attempts

    @staticmethod
    def resolve_attempts(entry) -> list:
        return entry.attempt_history()


class RunDetailOut(RunOut):
    steps: list[StepOut] = Field(
        description="By scope (the root's first), then position; a superseded record precedes its replacement."
    )
    cost: RunCostOut | None = Field(
        description="What its model calls (steps' meta.usage and meta.gen_ai) used and, priced by"
        ' WORKFLOWS["MODEL_PRICES"], cost; each record\'s latest usage, superseded ones included. Null: none recorded.'
    )

    @staticmethod
    def resolve_cost(run) -> dict | None:
        return run_cost(run)

    @staticmethod
    def resolve_steps(run) -> list:
        return list(run.entries.all())


class RunFilters(_NoNul):
    workflow: str | None = None
    status: Literal[tuple(s.value for s in RunStatus)] | None = None  # type: ignore[valid-type]
    key: list[str] | None = Field(None, description="The exact key: repeat the parameter per part.")
    created_after: dt.datetime | None = Field(None, description="ISO 8601; UTC when no offset is given.")
    created_before: dt.datetime | None = None
    cursor: str | None = Field(None, description="A next_cursor from the previous page.")
    limit: int = Field(50, ge=1, le=MAX_PAGE)

    @field_validator("created_after", "created_before", mode="before")
    @classmethod
    def _iso_8601(cls, value: Any) -> Any:
        # pydantic would read a bare number as Unix seconds: the schema promises ISO 8601 text.
        if isinstance(value, str) and value.strip().lstrip("+-").replace(".", "", 1).isdigit():
            raise ValueError("must be an ISO 8601 date and time, e.g. 2030-01-31T12:00:00Z")
        return value


class RunPageOut(Schema):
    items: list[RunSummaryOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last.")


class EventOut(Schema):
    id: int = Field(description="The cursor: read on with `after=<id>`.")
    event: str
    data: Masked
    created_at: dt.datetime
    step: str | None = Field(None, description="The step that broadcast it while it ran (null: the body).")
    attempt: int | None = Field(None, description="Which attempt of that step.")
    lost: bool = Field(
        False,
        description="Sent by an attempt that a crash or a database failure cut off (the step ran again):"
        " drop it. A `$lost` event names such events as they are found.",
    )

    @staticmethod
    def resolve_step(event) -> str | None:
        return event.step or None

    @staticmethod
    def resolve_event(event) -> str:
        return event.name

    @staticmethod
    def resolve_data(event) -> Any:
        return event.payload


class EventPageOut(Schema):
    items: list[EventOut]
    next_after: int = Field(description="Pass as `after` to read on (unchanged when nothing is new).")


class SendIn(_In):
    queue: str
    body: Any = None
    wait: bool = Field(False, description="Hold the request until the run completes the message.")
    timeout: float = Field(30.0, gt=0, le=MAX_WAIT, description="Seconds to wait with `wait`; then 504.")
    reason: str | None = Field(
        None, min_length=1, description="Makes this an operator's send, written to the audit log."
    )


class SentOut(Schema):
    messageId: int  # camelCase: the seed's JSON names


class AnsweredOut(Schema):
    messageId: int
    response: Any = Field(description="What the run passed to `message.complete(...)`.")


class ActionOut(Schema):
    result: Any = Field(description="The action's answer, as the app computed it (not masked).")


class ReasonIn(_In):
    reason: str = Field(min_length=1, description="Why: kept in the audit log.")


class ReplayIn(ReasonIn):
    entry_id: int = Field(ge=1, le=MAX_ID, description="A current entry of the run (see its steps).")
    input: Any = Field(
        None, description="When given (even null), the step reruns with this input instead of its own."
    )
    redeliver: bool = Field(
        True,
        description="Deliver the messages the superseded waits consumed again, in their original order;"
        " false: the replayed waits wait for new messages.",
    )


class ForkIn(_In):
    entry_id: int = Field(
        ge=1,
        le=MAX_ID,
        description="A current entry of the run's root scope: it and the later ones run fresh.",
    )
    key: list[str] | None = Field(
        None,
        description="The new run's key (409 `key_taken` when another run holds it); default <key>~fork-<n>.",
    )
    input: Any = Field(None, description="When given (even null), the entry (a step) runs with this input.")
    reason: str = Field("", description="Why: kept in both runs' audit logs.")


AUTH = {401: ErrorOut}
NOT_FOUND = {404: ErrorOut}
INVALID = {422: ErrorOut}
BODY = {400: ErrorOut}  # a body that is not JSON, or nested too deep (workflows.http.parser)
TOO_LARGE = {413: ErrorOut}  # a value over WORKFLOWS["MAX_VALUE_BYTES"] (or the body over Django's limit)
