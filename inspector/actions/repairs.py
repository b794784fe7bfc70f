"""The audited repairs: replay from a step, retry a step now, cancel a run."""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest, HttpResponse

from workflows import conf, operations
from workflows.core import repair_rules
from workflows.core.exceptions import NotApplicable, WorkflowError
from workflows.core.records import RunStatus
from workflows.engine.replayer import Compensations, compensations_on_cancel
from workflows.masking import mask, unmask
from workflows.models import Entry, Message, Run
from workflows.reads import declarations

from ..forms import ReplayForm, WhyForm
from .common import (
    NOT_APPLICABLE,
    Change,
    actor,
    done,
    entry_or_404,
    refused_response,
    render,
    run_or_404,
)

# --- replay from a step -----------------------------------------------------------------------


def replay_view(model_admin, request: HttpRequest, run_id: str, entry_id: int) -> HttpResponse:
    if refused := refused_response(model_admin, request, "replay", run_id, entry=entry_id):
        return refused
    run = run_or_404(run_id)
    entry = entry_or_404(run, entry_id)
    plan = operations.replay_plan(str(run.id), entry.id)
    messages = operations.redelivery_plan(plan)
    form = ReplayForm(
        request.POST or None, initial={"input": json.dumps(mask(entry.input), indent=2, ensure_ascii=False)}
    )
    error = refusal = repair_rules.why_not(repair_rules.REPLAY, run.status)
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        edit = form.cleaned_data["edit_input"]
        try:
            operations.replay_from(
                str(run.id),
                entry.id,
                actor=actor(request),
                reason=form.cleaned_data["why"],
                input=unmask(form.cleaned_data["input"], entry.input) if edit else None,
                edit_input=edit,
                redeliver=not form.cleaned_data["wait_for_new"],
            )
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            fate = "kept consumed" if form.cleaned_data["wait_for_new"] else "delivered again"
            sent = f" {len(messages)} message(s) {fate}." if messages else ""
            return done(
                request, run, f"Run replays from “{entry.name}”: {len(plan)} record(s) kept as history.{sent}"
            )
    changes = [
        Change(
            f"{e.kind} “{e.name}” (#{e.position})",
            f"{e.status}, {e.attempts} attempt(s)",
            "superseded: kept as history, runs again",
        )
        for e in plan
    ]
    changes.append(Change("run status", run.status, "pending: a runner picks it up now"))
    if run.error:
        changes.append(Change("run error", str(mask(run.error).get("message", ""))[:200], "cleared"))
    kept = Entry.objects.filter(
        run=run, scope=entry.scope, position__lt=entry.position, superseded=False
    ).count()
    again = declarations.runs_again(declarations.definition(run.workflow, run.version), plan)
    return render(
        model_admin,
        request,
        "confirm_replay.html",
        run,
        f"Replay from “{entry.name}”",
        status=status,
        entry=entry,
        entry_input=mask(entry.input),
        changes=changes,
        kept=kept,
        again=again,
        redelivered=[_redelivered(m) for m in messages],
        blocked=refusal is not None,
        form=form,
        error=error,
    )


PREVIEW_CHARS = 80  # a message's body on the confirmation page: a glance, masked


def _redelivered(message: Message) -> dict[str, Any]:
    """A message the replay delivers again, as the confirmation page lists it."""
    text = json.dumps(mask(message.body), ensure_ascii=False, separators=(",", ":"))
    preview = text if len(text) <= PREVIEW_CHARS else text[: PREVIEW_CHARS - 1] + "…"
    return {"id": message.id, "queue": message.queue, "sent_at": message.sent_at, "preview": preview}


# --- retry a step now -------------------------------------------------------------------------


def retry_view(model_admin, request: HttpRequest, run_id: str, entry_id: int) -> HttpResponse:
    if refused := refused_response(model_admin, request, "retry", run_id, entry=entry_id):
        return refused
    run = run_or_404(run_id)
    entry = entry_or_404(run, entry_id)
    form = WhyForm(request.POST or None)
    error = refusal = repair_rules.why_not(
        repair_rules.RETRY_NOW, run.status, step=entry.name, step_status=entry.status
    )
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        try:
            operations.retry_now(str(run.id), entry.id, actor=actor(request), reason=form.cleaned_data["why"])
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            return done(request, run, f"“{entry.name}” will retry now (attempt {entry.attempts + 1}).")
    due = entry.wake_at.isoformat(sep=" ", timespec="seconds") if entry.wake_at else "—"
    changes = [
        Change(f"step “{entry.name}”: attempt {entry.attempts + 1}", f"due {due}", "due now"),
    ]
    if run.status == RunStatus.WAITING:
        changes.append(Change("run", "waiting for the backoff", "woken now"))
    return render(
        model_admin,
        request,
        "confirm_action.html",
        run,
        f"Retry “{entry.name}” now",
        status=status,
        action="retry",
        button="Yes, retry now",
        entry=entry,
        changes=changes if refusal is None else [],
        form=form,
        error=error,
        blocked=refusal is not None,
    )


# --- cancel -----------------------------------------------------------------------------------


def cancel_view(model_admin, request: HttpRequest, run_id: str) -> HttpResponse:
    if refused := refused_response(model_admin, request, "cancel", run_id):
        return refused
    run = run_or_404(run_id)
    form = WhyForm(request.POST or None)
    error = refusal = repair_rules.why_not(repair_rules.CANCEL, run.status)
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        try:
            operations.cancel(str(run.id), actor=actor(request), reason=form.cleaned_data["why"])
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            return done(request, run, "Cancellation requested.")
    when = (
        "at its next step boundary (the step running now finishes first)"
        if run.status == RunStatus.RUNNING
        else "at once (a runner records it within moments)"
    )
    pending = run.messages.filter(consumed_at__isnull=True).count()
    changes = [Change("run status", run.status, f"cancelled, {when}")]
    if pending:
        changes.append(Change("pending messages", str(pending), "left unconsumed"))
    compensations = _compensations(run) if refusal is None else None
    if compensations is None:
        pass
    elif not compensations.known:
        changes.append(Change("compensations", "unknown", f"could not be worked out: {compensations.detail}"))
    elif compensations.steps:
        undo = ", then ".join(f"the rollback of “{step}”" for step in compensations.steps)
        changes.append(Change("compensations", "not run", f"run on cancel, each once: {undo}"))
    else:
        changes.append(Change("recorded steps", "kept", "kept: no completed step has a rollback to run"))
    return render(
        model_admin,
        request,
        "confirm_action.html",
        run,
        "Cancel this run",
        status=status,
        action="cancel",
        button="Yes, cancel the run",
        danger=True,
        changes=changes if refusal is None else [],
        compensations=compensations,
        form=form,
        error=error,
        blocked=refusal is not None,
    )


def _compensations(run: Run) -> Compensations:
    """What a cancel would compensate, from a dry replay of the run's history against this
    server's code (`workflows.engine.replayer`): no step body runs, nothing is written."""
    store = conf.default_store()
    record = store.get_run(str(run.id))
    return async_to_sync(compensations_on_cancel)(record, store.load_history(str(run.id)), conf.registry())
