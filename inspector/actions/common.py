"""What the operators' actions share: their permissions, the audit of a refused one, the run or
entry they act on, and the confirmation page they render (the package's docstring says how an
action goes)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.defaults import permission_denied

from workflows import operations
from workflows.core.records import AuditAction
from workflows.models import Entry, Run
from workflows.reads.live import parse_run_id
from workflows.reads.run import current_entry

from .. import live

PERMISSIONS = {
    "replay": "inspector.replay_run",
    "retry": "inspector.retry_step_now",
    "cancel": "inspector.cancel_run",
    "send": "inspector.send_message",
    "fork": "inspector.fork_run",
    "pause": "inspector.pause_run",  # a run's pause and resume, and a whole workflow's
    "resume": "inspector.pause_run",
}


@dataclass(frozen=True)
class Change:
    """One line of a confirmation page: what, from, to."""

    what: str
    before: str = ""
    after: str = ""


def allowed(request: HttpRequest, action: str) -> bool:
    return request.user.has_perm(PERMISSIONS[action])


AUDITED_AS = {
    "replay": AuditAction.REPLAY,
    "retry": AuditAction.RETRY_NOW,
    "cancel": AuditAction.CANCEL,
    "send": AuditAction.SEND,
    "fork": AuditAction.FORK,
    "pause": AuditAction.PAUSE,
    "resume": AuditAction.RESUME,
}


def storable(text: str, limit: int) -> str:
    """What a refused request typed, as any database stores it (no NUL, no lone surrogate)."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode()[:limit]


def refused_response(
    model_admin, request: HttpRequest, action: str, run_id: str, **attempt: Any
) -> HttpResponse | None:
    """None when the user may take `action`; else the 403 response, after auditing a refused POST
    (returned, not raised, so that ATOMIC_REQUESTS cannot roll the audit entry back)."""
    if model_admin.has_view_permission(request) and allowed(request, action):
        return None
    run = parse_run_id(run_id)
    if request.method == "POST" and run is not None:
        operations.record_refusal(
            run,
            AUDITED_AS[action],
            actor=actor(request),
            reason=storable(request.POST.get("why", "").strip(), 2000),
            details={"permission": PERMISSIONS[action], **attempt},
        )
    needs = PERMISSIONS[action] if model_admin.has_view_permission(request) else "workflows.view_run"
    what = "This action" if needs == PERMISSIONS[action] else "Reading runs"
    recorded = " Your attempt is recorded in the run's audit log." if request.method == "POST" and run else ""
    return permission_denied(request, PermissionDenied(f"{what} needs the permission {needs}.{recorded}"))


def run_or_404(run_id: str) -> Run:
    run_id = parse_run_id(run_id)
    run = Run.objects.filter(id=run_id).first() if run_id else None
    if run is None:
        raise Http404("no such run")
    return run


def entry_or_404(run: Run, entry_id: int) -> Entry:
    entry = current_entry(str(run.id), entry_id)
    if entry is None:
        raise Http404("no such current entry (it may have been replayed already)")
    return entry


def inspect_url(run: Run) -> str:
    return reverse("admin:workflows_run_inspect", args=[run.id])


def render(
    model_admin, request, template: str, run: Run, title: str, *, status: int = 200, **context: Any
) -> TemplateResponse:
    ctx = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "run": run,
        "title": title,
        "inspect_url": inspect_url(run),
        **context,
    }
    return TemplateResponse(request, f"admin/workflows/run/{template}", ctx, status=status)


NOT_APPLICABLE = 409  # a POST of a repair that does not apply to the run as it is


def done(request: HttpRequest, run: Run, text: str) -> HttpResponseRedirect:
    live.poke(str(run.id))
    messages.success(request, text)
    return HttpResponseRedirect(inspect_url(run))


def actor(request: HttpRequest) -> str:
    return request.user.get_username()
