"""The generic API's app routes: start a run, send it a message, call an action, and read runs and
their events (the router and its conventions: `workflows.http.api`)."""

from __future__ import annotations

from asgiref.sync import sync_to_async
from django.http import HttpResponse
from ninja import Query, Status

from .. import conf, operations
from ..core.exceptions import RunNotFound
from ..engine.client import RunHandle
from ..models import Run
from ..reads import runs as run_reads
from ..reads import source as read_source
from ..reads.live import parse_run_id
from . import sse
from .api import router
from .auth import actor
from .schemas import (
    AUTH,
    BODY,
    INVALID,
    MAX_ID,
    NOT_FOUND,
    TOO_LARGE,
    ActionOut,
    AnsweredOut,
    ErrorOut,
    EventPageOut,
    RunDetailOut,
    RunFilters,
    RunOut,
    RunPageOut,
    SendIn,
    SentOut,
    StartIn,
)


@router.post(
    "/workflows/{name}/runs",
    response={200: RunOut, 201: RunOut, **BODY, **AUTH, **NOT_FOUND, **TOO_LARGE, **INVALID},
    summary="Start a run (idempotent by key)",
    operation_id="workflows_api_start_run",
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
    operation_id="workflows_api_send_message",
)
async def send_message(request, run_id: str, payload: SendIn):
    """202 once the message is stored. With `wait`, 200 with the run's response once it completes
    the message, or 504 after `timeout` seconds (the message stays queued). With `reason` the send
    is an operator's and is written to the audit log. 409: the run has finished; 413: a body over
    MAX_VALUE_BYTES (nothing is stored); 422: unknown queue or a body its schema refuses."""
    handle = await _ahandle(run_id)
    message_id = await _asend(handle, payload, actor=actor(request))
    if not payload.wait:
        return Status(202, {"messageId": message_id})
    response = await handle.aresponse(message_id, timeout=payload.timeout)
    return Status(200, {"messageId": message_id, "response": response})


@router.post(
    "/runs/{run_id}/actions/{action}",
    response={200: ActionOut, **AUTH, **NOT_FOUND, **INVALID},
    summary="Call one of a run's actions",
    operation_id="workflows_api_call_action",
)
async def call_action(request, run_id: str, action: str):
    """The action's return value, computed from the run as stored now. 422: unknown action."""
    handle = await _ahandle(run_id)
    return {"result": await handle.aaction(action)}


@router.get(
    "/runs",
    response={200: RunPageOut, **AUTH, **INVALID},
    summary="List runs",
    operation_id="workflows_api_list_runs",
)
def list_runs(request, response: HttpResponse, filters: Query[RunFilters]):
    """Newest first, without state and result. Pages are stable: runs created meanwhile never
    shift them. 422: an unknown status, a bad time or cursor, a limit over 200. Read from
    READ_DATABASE when set: `X-Data-Source` and `X-Data-Age` (seconds behind) say so."""
    return read_source.read_into(response, lambda using: run_reads.run_list(**filters.dict(), using=using))


@router.get(
    "/runs/{run_id}",
    response={200: RunDetailOut, **AUTH, **NOT_FOUND},
    summary="Read one run",
    operation_id="workflows_api_get_run",
)
def get_run(request, run_id: str):
    """The run with its steps in history order, each with every attempt (start, end, outcome,
    error with traceback, the delay that followed); records an operator replayed are kept and
    flagged `superseded`."""
    return run_reads.run_detail(run_id)


@router.get(
    "/runs/{run_id}/events",
    response={200: EventPageOut, **AUTH, **NOT_FOUND, **INVALID},
    summary="Read events",
    operation_id="workflows_api_list_events",
)
def list_events(
    request,
    run_id: str,
    after: int = Query(0, ge=0, le=MAX_ID, description="Events with a greater id."),
    limit: int = Query(100, ge=1, le=run_reads.MAX_PAGE),
):
    """The run's events after a cursor, oldest first."""
    items = run_reads.run_events(run_id, after=after, limit=limit)
    return {"items": items, "next_after": items[-1].id if items else after}


@router.get(
    "/runs/{run_id}/streams/{name}",
    response={200: None, **AUTH, **NOT_FOUND, **INVALID},
    summary="Follow a stream (Server-Sent Events)",
    operation_id="workflows_api_follow_stream",
)
def follow_stream(
    request,
    run_id: str,
    name: str,
    after: int = Query(0, ge=0, le=MAX_ID, description="Chunks with a greater id (Last-Event-ID wins)."),
):
    """The chunks steps wrote to the stream `name` as `text/event-stream`: each chunk an
    `event: chunk` with its id, first those after the cursor, then new ones as they are stored;
    `event: end` once the run has finished. A chunk with `seq` 0 starts its step's text over (a
    retry). 404: no such run, or a finished run that never wrote this stream."""
    found = parse_run_id(run_id)
    try:
        if found is None:
            raise sse.UnknownStream(f"run {run_id} not found")
        sse.check_stream(found, name)
    except sse.UnknownStream as exc:
        raise RunNotFound(str(exc)) from None
    return sse.stream_response(found, name, sse.resume_point(request, after))


# --- helpers ----------------------------------------------------------------------------------------------


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
