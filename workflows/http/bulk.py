"""The generic API's bulk routes: preview a bulk action, start it, follow it, abort it, each
through `workflows.operations` with the actor `api:<key name>` (the router: `workflows.http.api`)."""

from __future__ import annotations

from ninja import Status

from ..bulk import control
from .api import router
from .auth import actor
from .bulk_schemas import BulkAbortIn, BulkOperationOut, BulkPreviewIn, BulkPreviewOut, BulkStartIn
from .schemas import AUTH, BODY, INVALID, NOT_FOUND, ErrorOut


def _filter(payload: BulkPreviewIn) -> dict:
    return payload.filter.model_dump(exclude_none=True)


@router.post(
    "/bulk/preview",
    response={200: BulkPreviewOut, **BODY, **AUTH, **INVALID},
    summary="Preview a bulk action (dry run)",
    operation_id="workflows_api_bulk_preview",
)
def bulk_preview(request, payload: BulkPreviewIn):
    """How many runs the action would act on now (`count`, 0 when none) and a sample of them;
    changes nothing. 422: an unknown action, or a filter that is empty or malformed."""
    preview = control.preview(payload.action, _filter(payload))
    return {
        "action": preview.action.name,
        "filter": preview.filter.to_dict(),
        "count": preview.count,
        "matched": preview.matched,
        "sample": preview.sample,
    }


@router.post(
    "/bulk",
    response={202: BulkOperationOut, **BODY, **AUTH, 409: ErrorOut, **INVALID},
    summary="Start a bulk action",
    operation_id="workflows_api_bulk_start",
)
def bulk_start(request, payload: BulkStartIn):
    """Starts the action on every run the filter matches that it applies to now, as a tracked
    operation a runner executes in batches (202; follow it with `GET /api/bulk/{id}`). Each run
    changed gets its audit entry naming the operation; runs the action no longer applies to when
    reached are skipped and listed. 409 `nothing_matches`: no run matches (no operation is
    created); 422: an unknown action, or a filter that is empty or malformed."""
    op = control.start(
        payload.action, _filter(payload), actor=actor(request), reason=payload.reason,
        expected_count=payload.expected_count,
    )  # fmt: skip
    return Status(202, op)


@router.get(
    "/bulk/{op_id}",
    response={200: BulkOperationOut, **AUTH, **NOT_FOUND},
    summary="A bulk operation's progress",
    operation_id="workflows_api_bulk_get",
)
def bulk_get(request, op_id: str):
    """Its counts so far (done, skipped, failed of total) and the runs skipped, with why."""
    return control.get(op_id)


@router.post(
    "/bulk/{op_id}/abort",
    response={200: BulkOperationOut, **BODY, **AUTH, **NOT_FOUND, 409: ErrorOut, **INVALID},
    summary="Abort a bulk operation",
    operation_id="workflows_api_bulk_abort",
)
def bulk_abort(request, op_id: str, payload: BulkAbortIn):
    """Stops it after its current batch (a pending one at once); what was done stays done.
    409 `not_applicable`: it has already finished; 422: a malformed reason."""
    return control.abort(op_id, actor=actor(request), reason=payload.reason)
