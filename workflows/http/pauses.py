"""The generic API's pause routes: pause and resume a run or a whole workflow, and the list of
paused workflows, each through `workflows.operations` with the actor `api:<key name>` (the
router: `workflows.http.api`)."""

from __future__ import annotations

import datetime as dt

from ninja import Path, Schema

from .. import operations
from .api import router
from .auth import actor
from .schemas import AUTH, BODY, INVALID, NOT_FOUND, ErrorOut, ReasonIn, RunOut

WORKFLOW_NAME = Path(..., min_length=1, max_length=200)


class WorkflowPauseOut(Schema):
    workflow: str
    reason: str
    actor: str
    paused_at: dt.datetime
    paused_runs: int  # its runs paused one by one (they stay paused when the workflow resumes)


@router.post(
    "/runs/{run_id}/pause",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **INVALID},
    summary="Pause a run",
    operation_id="workflows_api_pause",
)
def pause(request, run_id: str, payload: ReasonIn):
    """A waiting or pending run is paused at once (its due time kept, no lease held); a running
    one at its next entry: its step in flight finishes and records its result first
    (`pause_requested` shows the request meanwhile). No runner claims it until it is resumed.
    409 `not_applicable`: the run has finished, or is paused already (nothing changes, nothing
    is audited)."""
    return operations.pause_run(run_id, actor=actor(request), reason=payload.reason)


@router.post(
    "/runs/{run_id}/resume",
    response={200: RunOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **INVALID},
    summary="Resume a paused run",
    operation_id="workflows_api_resume",
)
def resume(request, run_id: str, payload: ReasonIn):
    """The run is due again at its kept due time, at once if that passed while it was paused (a
    timeout that fell due meanwhile fires now). 409 `not_applicable`: the run is not paused."""
    return operations.resume_run(run_id, actor=actor(request), reason=payload.reason)


@router.post(
    "/workflows/{name}/pause",
    response={200: WorkflowPauseOut, **BODY, **AUTH, 409: ErrorOut, **INVALID},
    summary="Pause a workflow",
    operation_id="workflows_api_pause_workflow",
)
def pause_workflow(request, payload: ReasonIn, name: str = WORKFLOW_NAME):
    """No run of the workflow is claimed until it is resumed; its runs running now stop at their
    next entry. Any name is accepted (a workflow this server does not declare may still have
    runs). 409 `not_applicable`: it is paused already."""
    return operations.pause_workflow(name, actor=actor(request), reason=payload.reason)


@router.post(
    "/workflows/{name}/resume",
    response={200: WorkflowPauseOut, **BODY, **AUTH, 409: ErrorOut, **INVALID},
    summary="Resume a workflow",
    operation_id="workflows_api_resume_workflow",
)
def resume_workflow(request, payload: ReasonIn, name: str = WORKFLOW_NAME):
    """Its runs are claimed again (runs paused one by one stay paused). 409 `not_applicable`:
    it is not paused."""
    return operations.resume_workflow(name, actor=actor(request), reason=payload.reason)


@router.get(
    "/paused-workflows",
    response={200: list[WorkflowPauseOut], **AUTH},
    summary="Paused workflows",
    operation_id="workflows_api_paused_workflows",
)
def paused_workflows(request):
    """The workflows paused now, by name, each with how many of its runs are paused
    one by one."""
    return operations.paused_workflows()
