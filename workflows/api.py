"""The generic HTTP API for every registered workflow, mounted at /api/ (DESIGN.md §5).

Each operation reads like a line of a table of contents: schema in, one client, selector or
operation call, schema out. Domain errors become HTTP once, all in one shape, on the NinjaAPI that
mounts this router (`workflows.api_errors.install_error_handlers`, as config/api.py does):
`{"error": {"code", "message", "detail"}}`. Every route needs `Authorization: Bearer <API key>`.

Two kinds of writes: an app's (start, send, action) through the workflow client, and an
operator's repairs (replay, retry now, cancel, and a send that carries a `reason`) through
`workflows.operations`, which audits them with the actor `api:<key name>`.
"""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from ninja import Field, Path, Query, Router, Schema, Status
from pydantic import AfterValidator, ConfigDict, field_validator

from . import conf, operations, read_source, selectors
from .api_auth import ApiKeyAuth
from .core.jsonvalue import unstorable
from .core.records import RunStatus
from .engine.client import MAX_DEBOUNCE, RunHandle
from .masking import mask
from .models import Run

router = Router(auth=ApiKeyAuth(), tags=["workflows"])

MAX_ID = 2**63 - 1  # entry and event ids are 64-bit integers
MAX_WAIT = 300.0  # seconds a `wait=true` send may hold its request at most


# --- schemas ----------------------------------------------------------------------------------------

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
    limit: int = Field(50, ge=1, le=selectors.MAX_PAGE)

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


AUTH = {401: ErrorOut}
NOT_FOUND = {404: ErrorOut}
INVALID = {422: ErrorOut}
BODY = {400: ErrorOut}  # a body that is not JSON, or nested too deep (workflows.api_parser)
TOO_LARGE = {413: ErrorOut}  # a value over WORKFLOWS["MAX_VALUE_BYTES"] (or the body over Django's limit)


# --- starting and talking to runs ---------------------------------------------------------------------


@router.post(
    "/workflows/{name}/runs",
    response={200: RunOut, 201: RunOut, **BODY, **AUTH, **NOT_FOUND, **TOO_LARGE, **INVALID},
    summary="Start a run (idempotent by key)",
)
def start_run(request, name: str, payload: StartIn):
    """Creates the run of this key (201) or returns the existing one (200): a stable key makes
    starts idempotent. `message` is stored with the run when this call creates it, and not sent
    again by a repeated call. `on_conflict="replace"` starts a new run under the key instead
    (the old one is asked to cancel); `debounce` delays the start until no start of the key came
    for that many seconds. 404: unknown workflow; 413: a message over MAX_VALUE_BYTES (nothing
    is stored); 422: a bad key, message or option."""
    return _start(name, payload)


@router.post(
    "/runs/{run_id}/messages",
    response={
        200: AnsweredOut,
        202: SentOut,
        **BODY,
        **AUTH,
        **NOT_FOUND,
        409: ErrorOut,
        **TOO_LARGE,
        **INVALID,
        504: ErrorOut,
    },
    summary="Send a message to a run",
)
async def send_message(request, run_id: str, payload: SendIn):
    """202 once the message is stored. With `wait`, 200 with the run's response once it completes
    the message, or 504 after `timeout` seconds (the message stays queued). With `reason` the send
    is an operator's and is written to the audit log. 409: the run has finished; 413: a body over
    MAX_VALUE_BYTES (nothing is stored); 422: unknown queue or a body its schema refuses."""
    handle = await _ahandle(run_id)
    message_id = await _asend(handle, payload, actor=_actor(request))
    if not payload.wait:
        return Status(202, {"messageId": message_id})
    response = await handle.aresponse(message_id, timeout=payload.timeout)
    return Status(200, {"messageId": message_id, "response": response})


@router.post(
    "/runs/{run_id}/actions/{action}",
    response={200: ActionOut, **AUTH, **NOT_FOUND, **INVALID},
    summary="Call one of a run's actions",
)
async def call_action(request, run_id: str, action: str):
    """The action's return value, computed from the run as stored now. 422: unknown action."""
    handle = await _ahandle(run_id)
    return {"result": await handle.aaction(action)}


# --- reading runs ---------------------------------------------------------------------------------------


@router.get("/runs", response={200: RunPageOut, **AUTH, **INVALID}, summary="List runs")
def list_runs(request, response: HttpResponse, filters: Query[RunFilters]):
    """Newest first, without state and result. Pages are stable: runs created meanwhile never
    shift them. 422: an unknown status, a bad time or cursor, a limit over 200. Read from
    READ_DATABASE when set: `X-Data-Source` and `X-Data-Age` (seconds behind) say so."""
    return read_source.read_into(response, lambda using: selectors.run_list(**filters.dict(), using=using))


@router.get("/runs/{run_id}", response={200: RunDetailOut, **AUTH, **NOT_FOUND}, summary="Read one run")
def get_run(request, run_id: str):
    """The run with its steps in history order, each with every attempt (start, end, outcome,
    error with traceback, the delay that followed); records an operator replayed are kept and
    flagged `superseded`."""
    return selectors.run_detail(run_id)


@router.get(
    "/runs/{run_id}/events",
    response={200: EventPageOut, **AUTH, **NOT_FOUND, **INVALID},
    summary="Read events",
)
def list_events(
    request,
    run_id: str,
    after: int = Query(0, ge=0, le=MAX_ID, description="Events with a greater id."),
    limit: int = Query(100, ge=1, le=selectors.MAX_PAGE),
):
    """The run's events after a cursor, oldest first."""
    items = selectors.run_events(run_id, after=after, limit=limit)
    return {"items": items, "next_after": items[-1].id if items else after}


# --- operators' repairs (audited) ---------------------------------------------------------------------


@router.post(
    "/runs/{run_id}/replay",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **TOO_LARGE, **INVALID},
    summary="Replay from a step",
)
def replay(request, run_id: str, payload: ReplayIn):
    """Runs the run again from `entry_id`: that entry and the later ones of its scope become
    superseded history; earlier ones, waits included, stay. 409 `not_applicable`: the run is
    running right now (nothing changes, nothing is audited); 413: an edited input over
    MAX_VALUE_BYTES; 422: not a current entry of the run."""
    return operations.replay_from(
        run_id,
        payload.entry_id,
        actor=_actor(request),
        reason=payload.reason,
        input=payload.input,
        edit_input="input" in payload.model_fields_set,
    )


@router.post(
    "/runs/{run_id}/entries/{entry_id}/retry-now",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **INVALID},
    summary="Retry a step now",
)
def retry_now(request, run_id: str, payload: ReasonIn, entry_id: int = Path(..., ge=1, le=MAX_ID)):
    """Skips the rest of a step's retry backoff. 409 `not_applicable`: the run has finished or was
    cancelled, or the step is not waiting to retry (nothing changes, nothing is audited); 422: not
    a current entry of the run."""
    return operations.retry_now(run_id, entry_id, actor=_actor(request), reason=payload.reason)


@router.post(
    "/runs/{run_id}/cancel",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **INVALID},
    summary="Cancel a run",
)
def cancel(request, run_id: str, payload: ReasonIn):
    """A waiting run ends cancelled at once, a running one at its next entry (`cancel_requested`
    shows the request meanwhile). 409 `not_applicable`: the run has already finished (nothing
    changes, nothing is audited)."""
    return operations.cancel(run_id, actor=_actor(request), reason=payload.reason)


# --- helpers ----------------------------------------------------------------------------------------------


def _actor(request) -> str:
    return f"api:{request.api_key.name}"


def _start(name: str, payload: StartIn) -> Status:
    """Create-or-get the run; a run this creates gets the first message with it (or nothing is
    written)."""
    client = conf.registry().client(name)
    message = None if payload.message is None else (payload.message.queue, payload.message.body)
    handle = client.get_or_create(
        payload.key,
        state=payload.state,
        on_conflict=payload.on_conflict,
        debounce=payload.debounce,
        priority=payload.priority,
        message=message,
    )
    return Status(201 if handle.created else 200, Run.objects.get(pk=handle.run_id))


async def _ahandle(run_id: str) -> RunHandle:
    run = await conf.default_store().aget_run(run_id)
    return RunHandle(conf.registry().client(run.workflow), run)


async def _asend(handle: RunHandle, payload: SendIn, *, actor: str) -> int:
    if payload.reason is None:
        return (await handle.asend(payload.queue, payload.body)).id
    return await sync_to_async(operations.send)(
        handle.run_id,
        payload.queue,
        payload.body,
        registry=conf.registry(),
        actor=actor,
        reason=payload.reason,
    )
