"""The dashboard's paused workflows: the table (workflow, since, who, why, its runs paused one by
one) with a Resume button, and the form that pauses a whole workflow. Both ask why and need
`inspector.pause_run` (what pausing a run needs); they call `operations.pause_workflow` /
`resume_workflow`, which write the audit entries (on each unfinished run of the workflow).

The form on the dashboard is the confirmation: it names the workflow and takes the reason. A
refusal (already paused, not paused) answers 409 on the dashboard's look, changing nothing."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from workflows import conf, operations
from workflows.core.exceptions import BadInput, NotApplicable

from .access import view_runs_required
from .actions import PERMISSIONS
from .forms import WhyForm

PERMISSION = PERMISSIONS["pause"]


class WorkflowPauseForm(WhyForm):
    workflow = forms.CharField(label="Workflow", max_length=200)

    def clean_workflow(self) -> str:
        return self.cleaned_data["workflow"].strip()


def may_pause(request: HttpRequest) -> bool:
    return request.user.has_perm(PERMISSION)


def dashboard_context(request: HttpRequest) -> dict[str, Any]:
    """The paused workflows (read on the primary: what holds now) and whether the user may act."""
    return {
        "paused_workflows": operations.paused_workflows(),
        "may_pause": may_pause(request),
        "workflow_names": conf.registry().names(),
    }


def _refused(request: HttpRequest, form: WorkflowPauseForm, error: str, status: int) -> HttpResponse:
    context = {
        **admin.site.each_context(request),
        "is_nav_sidebar_enabled": False,
        "title": "Paused workflows",
        "form": form,
        "error": error,
        **dashboard_context(request),
    }
    return TemplateResponse(request, "inspector/workflow_pause.html", context, status=status)


def _act(request: HttpRequest, pause: bool) -> HttpResponse:
    if not may_pause(request):
        raise PermissionDenied(f"Pausing or resuming a workflow needs the permission {PERMISSION}.")
    form = WorkflowPauseForm(request.POST)
    if not form.is_valid():
        return _refused(request, form, "Name the workflow and say why: it goes to the audit log.", 400)
    name, why, who = form.cleaned_data["workflow"], form.cleaned_data["why"], request.user.get_username()
    try:
        if pause:
            operations.pause_workflow(name, actor=who, reason=why)
        else:
            operations.resume_workflow(name, actor=who, reason=why)
    except (NotApplicable, BadInput) as exc:
        return _refused(request, form, str(exc), 409)
    messages.success(request, f"Workflow “{name}” {'paused' if pause else 'resumed'}.")
    return redirect(reverse("inspector:dashboard") + "#wf-paused-workflows")


@require_POST
@view_runs_required
def pause_view(request: HttpRequest) -> HttpResponse:
    return _act(request, pause=True)


@require_POST
@view_runs_required
def resume_view(request: HttpRequest) -> HttpResponse:
    return _act(request, pause=False)
