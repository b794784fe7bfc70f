"""The generic API's operator routes: replay, fork, retry now and cancel, each audited by
`workflows.operations` with the actor `api:<key name>` (the router: `workflows.http.api`)."""

from __future__ import annotations

from ninja import Path, Status

from .. import operations
from .api import router
from .auth import actor
from .schemas import (
    AUTH,
    BODY,
    INVALID,
    MAX_ID,
    NOT_FOUND,
    TOO_LARGE,
    ErrorOut,
    ForkIn,
    ReasonIn,
    ReplayIn,
    RunOut,
)


@router.post(
    "/runs/{run_id}/replay",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **TOO_LARGE, **INVALID},
    summary="Replay from a step",
    operation_id="workflows_api_replay",
)
def replay(request, run_id: str, payload: ReplayIn):
    """Runs the run again from `entry_id`: that entry and the later ones of its scope become
    superseded history; earlier ones, waits included, stay. The messages the superseded waits
    consumed are delivered again in their original order (`redeliver: false`: the replayed waits
    wait for new ones instead; either way the audit entry names them). 409 `not_applicable`: the run is
    running right now (nothing changes, nothing is audited); 413: an edited input over
    MAX_VALUE_BYTES; 422: not a current entry of the run."""
    return operations.replay_from(
        run_id,
        payload.entry_id,
        actor=actor(request),
        reason=payload.reason,
        input=payload.input,
        edit_input="input" in payload.model_fields_set,
        redeliver=payload.redeliver,
    )


@router.post(
    "/runs/{run_id}/fork",
    response={201: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **TOO_LARGE, **INVALID},
    summary="Fork a run from a step",
    operation_id="workflows_api_fork",
)
def fork(request, run_id: str, payload: ForkIn):
    """Starts a new run from this run's history up to `entry_id`: the entries before it are copied
    (with their results, attempts and consumed messages), it and the later ones run fresh (with
    `input`, the step first with that input). The original is only read; both audit logs name the
    other. 201 with the new run; 404: no such run, or no such entry in it; 409 `key_taken`: another
    run holds `key`; 409 `not_applicable`: the entry is nested in a join, race, loop or try
    scope, superseded, or after an entry that has not finished; 422: an input for an entry that is
    not a step."""
    new_run = operations.fork_run(
        run_id,
        payload.entry_id,
        actor=actor(request),
        reason=payload.reason,
        key=payload.key,
        input=payload.input,
        edit_input="input" in payload.model_fields_set,
    )
    return Status(201, new_run)


@router.post(
    "/runs/{run_id}/entries/{entry_id}/retry-now",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **INVALID},
    summary="Retry a step now",
    operation_id="workflows_api_retry_now",
)
def retry_now(request, run_id: str, payload: ReasonIn, entry_id: int = Path(..., ge=1, le=MAX_ID)):
    """Skips the rest of a step's retry backoff. 409 `not_applicable`: the run has finished or was
    cancelled, or the step is not waiting to retry (nothing changes, nothing is audited); 422: not
    a current entry of the run."""
    return operations.retry_now(run_id, entry_id, actor=actor(request), reason=payload.reason)


@router.post(
    "/runs/{run_id}/cancel",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **INVALID},
    summary="Cancel a run",
    operation_id="workflows_api_cancel",
)
def cancel(request, run_id: str, payload: ReasonIn):
    """A waiting run ends cancelled at once, a running one at its next entry (`cancel_requested`
    shows the request meanwhile). 409 `not_applicable`: the run has already finished (nothing
    changes, nothing is audited)."""
    return operations.cancel(run_id, actor=actor(request), reason=payload.reason)
