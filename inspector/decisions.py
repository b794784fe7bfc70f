"""The decision form: an operator decides for a run waiting on one of its workflow's decision queues
(`queue(Approval, choices={...}, note="note", shows=("title", "summary"))`).

The page shows what is being decided on (the state keys the queue's `shows` names, masked), one
button per declared choice with the exact body it sends, and the note field when the queue takes
one. The body is the choice's template with the signed-in operator wherever it says `OPERATOR`, so
who decided is the same user in the message and in the audit log; the operator cannot type it.
It is the send action underneath (`workflows.operations.send`, audited, permission
`inspector.send_message`); the generic send page keeps the queues that declare no choices.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse

from workflows import conf, operations
from workflows.core.exceptions import WorkflowError
from workflows.core.records import TERMINAL
from workflows.masking import mask
from workflows.reads import declarations

from .actions import waiting_on
from .actions.common import Change, actor, done, refused_response, render, run_or_404, storable
from .forms import DecisionForm, refusal_text


def _body(spec: Any, choice: str, operator: str, note: str) -> Any:
    body = spec.choice_body(choice, operator=operator)
    if spec.note and note:
        if not isinstance(body, dict):
            raise WorkflowError(
                f"the choice “{choice}” sends {type(body).__name__}, which cannot carry a note"
            )
        body = {**body, spec.note: note}
    return body


def decide_view(model_admin: Any, request: HttpRequest, run_id: str, queue: str) -> HttpResponse:
    # A refused POST is audited as an attempted send to this queue (what the form does).
    if refused := refused_response(model_admin, request, "send", run_id, queue=storable(queue, 200)):
        return refused
    run = run_or_404(run_id)
    definition = declarations.definition(run.workflow, run.version)
    spec = declarations.decision_spec(definition, queue)
    if spec is None:
        raise Http404(f"“{queue}” is not a decision queue of the workflow “{run.workflow}”")
    operator = actor(request)
    picked = request.POST.get("choice") or request.GET.get("choice") or None
    form = DecisionForm(request.POST or None, choices=list(spec.choices), takes_note=spec.note is not None)
    error = None
    blocked = run.status in TERMINAL
    if blocked:
        error = f"The run is {run.status}: it takes no more decisions."
    elif request.method == "GET" and picked is not None and picked not in spec.choices:
        error = f"“{picked}” is not a declared choice of the queue “{queue}”: press one of the buttons below."
    elif request.method == "POST" and form.is_valid():
        choice, note = form.cleaned_data["choice"], form.cleaned_data.get("note", "")
        try:
            message_id = operations.send(
                str(run.id),
                queue,
                _body(spec, choice, operator, note),
                registry=conf.registry(),
                actor=operator,
                reason=note or f"{choice} (decision form)",
            )
        except WorkflowError as exc:
            error = refusal_text(exc)
        else:
            return done(request, run, f"{choice}: your decision is sent to “{queue}” (message {message_id}).")
    elif request.method == "POST":
        error = " ".join(str(e) for errors in form.errors.values() for e in errors)

    waiting = waiting_on(run)
    wakes = waiting is not None and (not waiting or queue in waiting)
    changes = [
        Change("new message", "", f"on the queue “{queue}”: the choice you press, by {operator}"),
        Change(
            "run",
            run.status,
            "woken: its open wait takes your decision" if wakes else f"unchanged until it waits on “{queue}”",
        ),
    ]
    buttons = [
        {
            "choice": choice,
            "body": json.dumps(mask(spec.choice_body(choice, operator=operator)), ensure_ascii=False),
            "picked": choice == picked,
        }
        for choice in spec.choices
    ]
    return render(
        model_admin,
        request,
        "decide.html",
        run,
        f"Decide: {queue}",
        queue=queue,
        reviewed=declarations.reviewed(definition, queue, run.state),
        labels=declarations.run_labels(run),
        buttons=buttons,
        note_key=spec.note,
        form=form,
        error=error,
        changes=changes,
        blocked=blocked,
        operator=operator,
    )
