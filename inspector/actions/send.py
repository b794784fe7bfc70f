"""Send a message to a run (audited), with the decision queues' choices as one-click prefills."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from workflows import conf, operations
from workflows.core.exceptions import WorkflowError
from workflows.core.records import TERMINAL, EntryStatus
from workflows.masking import mask
from workflows.models import Entry, Run
from workflows.reads import declarations

from ..forms import SendForm, refusal_text
from .common import (
    Change,
    actor,
    done,
    refused_response,
    render,
    run_or_404,
    storable,
)

# --- send a message ---------------------------------------------------------------------------


def _queues(run: Run) -> list[str]:
    """The queues the generic send offers: all but the decision queues, which have their form."""
    try:
        queues = conf.registry().get(run.workflow).queues
    except WorkflowError:
        return []
    decided = declarations.decision_queues(declarations.definition(run.workflow, run.version))
    return sorted(q for q in queues if q not in decided)


def waiting_on(run: Run) -> list[str] | None:
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
        body = declarations.choice_body(definition, queue or "", choice, actor(request))
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
    queue = storable(request.POST.get("queue", ""), 200)
    if refused := refused_response(model_admin, request, "send", run_id, queue=queue):
        return refused
    run = run_or_404(run_id)
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
                    actor=actor(request),
                    reason=form.cleaned_data["why"],
                )
                return done(request, run, f"Message {message_id} sent to “{queue}”.")
            preview = {"queue": queue, "body": mask(body)}
        except WorkflowError as exc:
            error = refusal_text(exc)
    changes = []
    if preview is not None:
        waiting = waiting_on(run)
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
    return render(
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
