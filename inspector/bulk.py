"""The dashboard's bulk actions: a filter form, its dry run (the count and a sample), a
confirmation that names the count, then the operation's page with its live progress and an
Abort button; the dashboard lists the latest operations, live too.

Reading needs what every dashboard page needs (inspector.access); starting or aborting an
operation needs the permission of the single-run repair it is a bulk form of (cancel:
`inspector.cancel_run`, replay: `inspector.replay_run`, retry now: `inspector.retry_step_now`).
The views check, render and call `workflows.bulk.control`, which decides what is allowed.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_POST

from workflows.bulk import control
from workflows.bulk.actions import ACTIONS
from workflows.core.exceptions import BadInput, NotApplicable, NothingMatches, OperationNotFound
from workflows.core.records import RunStatus

from .access import view_runs_required
from .actions import PERMISSIONS

# Each bulk action's permission: its single-run repair's. Pause and resume add theirs here.
BULK_PERMISSIONS = {
    "cancel": PERMISSIONS["cancel"],
    "replay": PERMISSIONS["replay"],
    "retry_now": PERMISSIONS["retry"],
    "pause": PERMISSIONS["pause"],
    "resume": PERMISSIONS["resume"],
}
FILTER_FIELDS = (
    "workflow",
    "status",
    "version",
    "error",
    "created_after",
    "created_before",
    "concurrency_group",
)


class BulkForm(forms.Form):
    action = forms.ChoiceField(choices=[(a.name, a.label) for a in ACTIONS.values()])
    workflow = forms.CharField(required=False)
    status = forms.MultipleChoiceField(
        required=False, choices=[(s.value, s.value) for s in RunStatus], widget=forms.CheckboxSelectMultiple
    )
    version = forms.CharField(required=False)
    error = forms.CharField(required=False, label="Error contains")
    created_after = forms.CharField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    created_before = forms.CharField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"})
    )
    concurrency_group = forms.CharField(required=False)

    def filter(self) -> dict[str, Any]:
        return {name: self.cleaned_data.get(name) for name in FILTER_FIELDS}


def _context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    return {**admin.site.each_context(request), "is_nav_sidebar_enabled": False, **extra}


def _may(request: HttpRequest, action: str) -> bool:
    permission = BULK_PERMISSIONS.get(action)
    return permission is not None and request.user.has_perm(permission)


def _refuse(action: str) -> PermissionDenied:
    return PermissionDenied(f"This bulk action needs the permission {BULK_PERMISSIONS.get(action, action)}.")


@view_runs_required
def bulk_view(request: HttpRequest) -> HttpResponse:
    """GET: the form, and with `preview` its dry run and the confirmation; POST: start."""
    data = request.POST if request.method == "POST" else request.GET
    form = BulkForm(data if "action" in data else None)
    ctx = _context(request, title="Bulk action", form=form)
    if not form.is_bound:
        return TemplateResponse(request, "inspector/bulk.html", ctx)
    if not form.is_valid():
        return TemplateResponse(request, "inspector/bulk.html", ctx, status=422)
    action, run_filter = form.cleaned_data["action"], form.filter()
    if request.method == "POST":
        if not _may(request, action):
            raise _refuse(action)
        return _start(request, ctx, action, run_filter)
    try:
        preview = control.preview(action, run_filter)
    except BadInput as exc:
        return TemplateResponse(request, "inspector/bulk.html", {**ctx, "error": str(exc)}, status=422)
    ctx.update(preview=preview, allowed=_may(request, action))
    return TemplateResponse(request, "inspector/bulk.html", ctx)


def _start(
    request: HttpRequest, ctx: dict[str, Any], action: str, run_filter: dict[str, Any]
) -> HttpResponse:
    reason = request.POST.get("why", "").strip()
    if not reason:
        return TemplateResponse(
            request,
            "inspector/bulk.html",
            {**ctx, "error": "Say why: it is kept in each run's audit log."},
            status=422,
        )
    try:
        expected = int(request.POST.get("expected_count", ""))
    except ValueError:
        expected = None
    try:
        op = control.start(
            action, run_filter, actor=request.user.get_username(), reason=reason, expected_count=expected
        )
    except BadInput as exc:  # NothingMatches (409) or a malformed filter (422)
        status = 409 if isinstance(exc, NothingMatches) else 422
        return TemplateResponse(request, "inspector/bulk.html", {**ctx, "error": str(exc)}, status=status)
    return redirect("inspector:bulk_operation", op.id)


def _operation(op_id: int) -> Any:
    try:
        return control.get(op_id)
    except OperationNotFound:
        raise Http404("no such bulk operation") from None


@view_runs_required
def operation_view(request: HttpRequest, op_id: int) -> HttpResponse:
    op = _operation(op_id)
    ctx = _context(request, title=f"Bulk operation {op.id}", op=op, **_progress(request, op))
    return TemplateResponse(request, "inspector/bulk_operation.html", ctx)


@view_runs_required
def progress_fragment(request: HttpRequest, op_id: int) -> HttpResponse:
    op = _operation(op_id)
    return TemplateResponse(request, "inspector/_bulk_progress.html", {"op": op, **_progress(request, op)})


@view_runs_required
def recent_fragment(request: HttpRequest) -> HttpResponse:
    return TemplateResponse(request, "inspector/_bulk_list.html", recent_context())


def recent_context() -> dict[str, Any]:
    """The dashboard's section: the latest operations, unfinished ones first."""
    ops = control.recent()
    return {"bulk_ops": ops, "bulk_active": any(not op.finished for op in ops)}


def _progress(request: HttpRequest, op: Any) -> dict[str, Any]:
    percent = round(100 * op.processed / op.total) if op.total else 100
    action = ACTIONS.get(op.action)
    return {
        "label": action.label if action else op.action,
        "percent": percent,
        "skips": control.skipped_runs(op),
        "may_abort": not op.finished and not op.abort_requested and _may(request, op.action),
    }


@require_POST
@view_runs_required
def abort_view(request: HttpRequest, op_id: int) -> HttpResponse:
    op = _operation(op_id)
    if not _may(request, op.action):
        raise _refuse(op.action)
    try:
        control.abort(op.id, actor=request.user.get_username(), reason=request.POST.get("why", "").strip())
    except NotApplicable as exc:
        ctx = _context(
            request, title=f"Bulk operation {op.id}", op=op, error=str(exc), **_progress(request, op)
        )
        return TemplateResponse(request, "inspector/bulk_operation.html", ctx, status=409)
    return redirect("inspector:bulk_operation", op.id)
