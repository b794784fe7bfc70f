"""The operators' actions in the admin: a confirmation page listing exactly what will change, then
one call to `workflows.operations` (which writes the audit entry) with the user as actor.

Each action needs its own permission (see inspector.models.RunOperation); a staff user without it
gets 403, and when they posted (tried to act, rather than look at the confirmation page) the run's
audit log gets a `refused` entry naming the attempt. The views only check, render and call: the
operation decides what is allowed.

A repair that does not apply to the run as it is (`workflows.core.repair_rules`: replay of a
running run, retry now of a finished or cancelled one, cancel of a finished one) is not offered by
the inspector; its confirmation page says why, and a direct POST answers 409 with that sentence,
changing nothing and writing no audit entry.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.defaults import permission_denied

from workflows import conf, operations
from workflows.core import repair_rules
from workflows.core.exceptions import NotApplicable, WorkflowError
from workflows.core.records import TERMINAL, AuditAction, EntryStatus, RunStatus
from workflows.engine.replayer import Compensations, compensations_on_cancel
from workflows.masking import mask, unmask
from workflows.models import Entry, Run
from workflows.reads import declarations
from workflows.reads.live import parse_run_id
from workflows.reads.run import current_entry

from . import live
from .forms import ReplayForm, SendForm, WhyForm, refusal_text

PERMISSIONS = {
    "replay": "inspector.replay_run",
    "retry": "inspector.retry_step_now",
    "cancel": "inspector.cancel_run",
    "send": "inspector.send_message",
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
}


def _storable(text: str, limit: int) -> str:
    """What a refused request typed, as any database stores it (no NUL, no lone surrogate)."""
    return text.replace("\x00", "").encode("utf-8", "replace").decode()[:limit]


def _refused(
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
            actor=_actor(request),
            reason=_storable(request.POST.get("why", "").strip(), 2000),
            details={"permission": PERMISSIONS[action], **attempt},
        )
    needs = PERMISSIONS[action] if model_admin.has_view_permission(request) else "workflows.view_run"
    what = "This action" if needs == PERMISSIONS[action] else "Reading runs"
    recorded = " Your attempt is recorded in the run's audit log." if request.method == "POST" and run else ""
    return permission_denied(request, PermissionDenied(f"{what} needs the permission {needs}.{recorded}"))


def _run(run_id: str) -> Run:
    run_id = parse_run_id(run_id)
    run = Run.objects.filter(id=run_id).first() if run_id else None
    if run is None:
        raise Http404("no such run")
    return run


def _entry(run: Run, entry_id: int) -> Entry:
    entry = current_entry(str(run.id), entry_id)
    if entry is None:
        raise Http404("no such current entry (it may have been replayed already)")
    return entry


def _inspect_url(run: Run) -> str:
    return reverse("admin:workflows_run_inspect", args=[run.id])


def _render(
    model_admin, request, template: str, run: Run, title: str, *, status: int = 200, **context: Any
) -> TemplateResponse:
    ctx = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.model._meta,
        "run": run,
        "title": title,
        "inspect_url": _inspect_url(run),
        **context,
    }
    return TemplateResponse(request, f"admin/workflows/run/{template}", ctx, status=status)


NOT_APPLICABLE = 409  # a POST of a repair that does not apply to the run as it is


def _done(request: HttpRequest, run: Run, text: str) -> HttpResponseRedirect:
    live.poke(str(run.id))
    messages.success(request, text)
    return HttpResponseRedirect(_inspect_url(run))


def _actor(request: HttpRequest) -> str:
    return request.user.get_username()


# --- replay from a step -----------------------------------------------------------------------


def replay_view(model_admin, request: HttpRequest, run_id: str, entry_id: int) -> HttpResponse:
    if refused := _refused(model_admin, request, "replay", run_id, entry=entry_id):
        return refused
    run = _run(run_id)
    entry = _entry(run, entry_id)
    plan = operations.replay_plan(str(run.id), entry.id)
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
                actor=_actor(request),
                reason=form.cleaned_data["why"],
                input=unmask(form.cleaned_data["input"], entry.input) if edit else None,
                edit_input=edit,
            )
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            return _done(
                request, run, f"Run replays from “{entry.name}”: {len(plan)} record(s) kept as history."
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
    return _render(
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
        blocked=refusal is not None,
        form=form,
        error=error,
    )


# --- retry a step now -------------------------------------------------------------------------


def retry_view(model_admin, request: HttpRequest, run_id: str, entry_id: int) -> HttpResponse:
    if refused := _refused(model_admin, request, "retry", run_id, entry=entry_id):
        return refused
    run = _run(run_id)
    entry = _entry(run, entry_id)
    form = WhyForm(request.POST or None)
    error = refusal = repair_rules.why_not(
        repair_rules.RETRY_NOW, run.status, step=entry.name, step_status=entry.status
    )
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        try:
            operations.retry_now(
                str(run.id), entry.id, actor=_actor(request), reason=form.cleaned_data["why"]
            )
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            return _done(request, run, f"“{entry.name}” will retry now (attempt {entry.attempts + 1}).")
    due = entry.wake_at.isoformat(sep=" ", timespec="seconds") if entry.wake_at else "—"
    changes = [
        Change(f"step “{entry.name}”: attempt {entry.attempts + 1}", f"due {due}", "due now"),
    ]
    if run.status == RunStatus.WAITING:
        changes.append(Change("run", "waiting for the backoff", "woken now"))
    return _render(
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
    if refused := _refused(model_admin, request, "cancel", run_id):
        return refused
    run = _run(run_id)
    form = WhyForm(request.POST or None)
    error = refusal = repair_rules.why_not(repair_rules.CANCEL, run.status)
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        try:
            operations.cancel(str(run.id), actor=_actor(request), reason=form.cleaned_data["why"])
        except NotApplicable as exc:  # the run changed since the page was drawn
            error, refusal, status = str(exc), str(exc), NOT_APPLICABLE
        except WorkflowError as exc:
            error = str(exc)
        else:
            return _done(request, run, "Cancellation requested.")
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
    return _render(
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


# --- send a message ---------------------------------------------------------------------------


def _queues(run: Run) -> list[str]:
    """The queues the generic send offers: all but the decision queues, which have their form."""
    try:
        queues = conf.registry().get(run.workflow).queues
    except WorkflowError:
        return []
    decided = declarations.decision_queues(declarations.definition(run.workflow, run.version))
    return sorted(q for q in queues if q not in decided)


def _waiting_on(run: Run) -> list[str] | None:
    """The queues the run's open wait listens to ([] = all), or None when it waits on none."""
    wait = Entry.objects.filter(
        run=run, kind=Entry.Kind.QUEUE, status=EntryStatus.WAITING, superseded=False
    ).first()
    if wait is None:
        return None
    return list((wait.input or {}).get("queues") or [])


def choice_url(run_id: str, queue: str, choice: str) -> str:
    """The decision form (inspector.decisions) of a queue declaring `choice` (`queue(...,
    choices=...)`), that choice picked out: what the dashboard's decision buttons open."""
    url = reverse("admin:workflows_run_decide", args=[run_id, queue])
    return f"{url}?{urlencode({'choice': choice})}" if choice else url


def _prefill(request: HttpRequest, run: Run) -> tuple[dict[str, Any], str | None]:
    """The form's first values, and an error: `?queue=…&choice=…` is that declared choice's body
    filled in for the user opening the page (QueueSpec.choice_body); `?queue=…&body=…` is taken as
    given. Either way the user reviews and confirms before anything is sent."""
    queue, choice = request.GET.get("queue"), request.GET.get("choice")
    prefill = {"queue": queue, "body": request.GET.get("body")}
    if choice is None or request.method == "POST":
        return prefill, None
    definition = declarations.definition(run.workflow, run.version)
    try:
        body = declarations.choice_body(definition, queue or "", choice, _actor(request))
    except LookupError as exc:
        return prefill, str(exc)
    prefill["body"] = json.dumps(body, indent=2, ensure_ascii=False)
    return prefill, None


def _choice_links(run: Run) -> list[dict[str, str]]:
    definition = declarations.definition(run.workflow, run.version)
    return [
        {"queue": queue, "choice": choice, "url": choice_url(str(run.id), queue, choice)}
        for queue, choices in declarations.decision_queues(definition).items()
        for choice in choices
    ]


def send_view(model_admin, request: HttpRequest, run_id: str) -> HttpResponse:
    queue = _storable(request.POST.get("queue", ""), 200)
    if refused := _refused(model_admin, request, "send", run_id, queue=queue):
        return refused
    run = _run(run_id)
    decided = declarations.decision_queues(declarations.definition(run.workflow, run.version))
    if request.GET.get("queue") in decided:  # an older link: decisions have their own form
        return HttpResponseRedirect(
            choice_url(str(run.id), request.GET["queue"], request.GET.get("choice", ""))
        )
    queues = _queues(run)
    prefill, error = _prefill(request, run)
    form = SendForm(request.POST or None, queues=queues, initial=prefill)
    preview = None
    terminal = run.status in TERMINAL
    if not queues:
        error = (
            f"The workflow “{run.workflow}” is not in this server's registries, or has no queues."
            if not decided
            else "Every queue of this run is a decision queue: decide with its form."
        )
    elif terminal:
        error = f"The run is {run.status}: it takes no more messages."
    elif request.method == "POST" and form.is_valid():
        queue, body = form.cleaned_data["queue"], form.cleaned_data["body"]
        try:
            # Validate against the queue's schema before anything is asked for or stored.
            spec = conf.registry().get(run.workflow).queue_spec(queue, run.workflow)
            body = spec.validate(f"queue {run.workflow}.{queue}", body)
            if form.cleaned_data.get("confirmed") == "1":
                message_id = operations.send(
                    str(run.id),
                    queue,
                    body,
                    registry=conf.registry(),
                    actor=_actor(request),
                    reason=form.cleaned_data["why"],
                )
                return _done(request, run, f"Message {message_id} sent to “{queue}”.")
            preview = {"queue": queue, "body": mask(body)}
        except WorkflowError as exc:
            error = refusal_text(exc)
    changes = []
    if preview is not None:
        waiting = _waiting_on(run)
        wakes = waiting is not None and (not waiting or preview["queue"] in waiting)
        changes = [
            Change("new message", "", f"on queue “{preview['queue']}”, stored before this page returns"),
            Change(
                "run",
                run.status,
                "woken: its open wait takes this message"
                if wakes
                else "unchanged until its code reads this queue",
            ),
        ]
    return _render(
        model_admin,
        request,
        "confirm_send.html",
        run,
        "Send a message",
        form=form,
        error=error,
        preview=preview,
        changes=changes,
        blocked=terminal or not queues,
        body_text=request.POST.get("body", ""),
        choice=request.GET.get("choice") if error is None else None,
        choice_links=_choice_links(run),
    )
