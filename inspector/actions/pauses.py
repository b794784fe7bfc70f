"""Pause a run, resume it: a confirmation page saying what changes (a waiting run is paused at
once, its due time kept; a running one at its next entry), then `operations.pause_run` /
`resume_run` (each audited) with the user as actor. Both need `inspector.pause_run`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from workflows import operations
from workflows.core import repair_rules
from workflows.core.exceptions import NotApplicable, WorkflowError
from workflows.core.records import RunStatus
from workflows.models import Run

from ..forms import WhyForm
from .common import NOT_APPLICABLE, Change, actor, done, refused_response, render, run_or_404


def _when(moment) -> str:
    return moment.isoformat(sep=" ", timespec="seconds") if moment else "—"


def pause_refusal(run: Run) -> str | None:
    """Why a pause does not apply to the run as it is (the store says the same under its lock)."""
    if run.status == RunStatus.RUNNING and run.pause_requested:
        return "Pause does not apply: this run is already asked to pause, at its next entry."
    return repair_rules.why_not(repair_rules.PAUSE, run.status)


def resume_refusal(run: Run) -> str | None:
    """Why a resume does not apply: a paused run resumes, a running one asked to pause is no
    longer asked (the request withdrawn)."""
    if run.status == RunStatus.RUNNING and run.pause_requested:
        return None
    return repair_rules.why_not(repair_rules.RESUME, run.status)


def _pause_changes(run: Run) -> list[Change]:
    if run.status == RunStatus.RUNNING:
        return [
            Change(
                "run status", run.status, "paused at its next entry (the step running now finishes first)"
            ),
        ]
    due = run.wake_at or run.held_at
    kept = f"kept: due {_when(due)} on resume" if due else "none to keep"
    return [
        Change("run status", run.status, "paused at once: no runner claims it until resumed"),
        Change("due time", _when(due), kept),
    ]


def _resume_changes(run: Run) -> list[Change]:
    if run.status == RunStatus.RUNNING:
        return [Change("pause request", "asked to pause at its next entry", "withdrawn: the run goes on")]
    return [
        Change(
            "run status",
            run.status,
            f"due again at {_when(run.paused_due_at)}, or at once if that has passed"
            if run.paused_due_at
            else "due at once",
        ),
    ]


def pause_view(model_admin, request: HttpRequest, run_id: str) -> HttpResponse:
    if refused := refused_response(model_admin, request, "pause", run_id):
        return refused
    run = run_or_404(run_id)
    form = WhyForm(request.POST or None)
    error = refusal = pause_refusal(run)
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        try:
            paused = operations.pause_run(str(run.id), actor=actor(request), reason=form.cleaned_data["why"])
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            text = (
                "Run paused." if paused.status == RunStatus.PAUSED else "Pause requested: at its next entry."
            )
            return done(request, run, text)
    return render(
        model_admin,
        request,
        "confirm_action.html",
        run,
        "Pause this run",
        status=status,
        action="pause",
        button="Yes, pause the run",
        changes=_pause_changes(run) if refusal is None else [],
        form=form,
        error=error,
        blocked=refusal is not None,
    )


def resume_view(model_admin, request: HttpRequest, run_id: str) -> HttpResponse:
    if refused := refused_response(model_admin, request, "resume", run_id):
        return refused
    run = run_or_404(run_id)
    form = WhyForm(request.POST or None)
    error = refusal = resume_refusal(run)
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        try:
            operations.resume_run(str(run.id), actor=actor(request), reason=form.cleaned_data["why"])
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            return done(request, run, "Run resumed.")
    return render(
        model_admin,
        request,
        "confirm_action.html",
        run,
        "Resume this run",
        status=status,
        action="resume",
        button="Yes, resume the run",
        changes=_resume_changes(run) if refusal is None else [],
        form=form,
        error=error,
        blocked=refusal is not None,
    )
