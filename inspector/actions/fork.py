"""Fork a run from a step: a confirmation page listing the entries the new run copies and those it
runs fresh, with an optional edited input and key, then `operations.fork_run` (audited on both
runs) and the new run's page."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse
from django.urls import reverse

from workflows import operations
from workflows.core import forks
from workflows.core.exceptions import KeyTaken, NotApplicable, WorkflowError
from workflows.masking import mask, unmask
from workflows.models import Entry, Run

from ..forms import ForkForm
from .common import NOT_APPLICABLE, actor, done, entry_or_404, refused_response, render, run_or_404


def _refusal(run: Run, entry: Entry) -> str | None:
    """Why a fork from `entry` does not apply (a nested entry), before the store says so."""
    if not entry.scope:
        return None
    roots = Entry.objects.filter(run=run, scope="", superseded=False).values_list("name", flat=True)
    return forks.nested_refusal(entry.name, entry.scope, forks.root_owner(entry.scope, roots))


def fork_view(model_admin, request: HttpRequest, run_id: str, entry_id: int) -> HttpResponse:
    if refused := refused_response(model_admin, request, "fork", run_id, entry=entry_id):
        return refused
    run = run_or_404(run_id)
    entry = entry_or_404(run, entry_id)
    form = ForkForm(
        request.POST or None, initial={"input": json.dumps(mask(entry.input), indent=2, ensure_ascii=False)}
    )
    error = refusal = _refusal(run, entry)
    status = NOT_APPLICABLE if refusal and request.method == "POST" else 200
    if request.method == "POST" and refusal is None and form.is_valid():
        edit = form.cleaned_data["edit_input"]
        try:
            fork = operations.fork_run(
                str(run.id),
                entry.id,
                actor=actor(request),
                reason=form.cleaned_data["why"],
                key=form.cleaned_data["key"],
                input=unmask(form.cleaned_data["input"], entry.input) if edit else None,
                edit_input=edit,
            )
        except (NotApplicable, KeyTaken) as exc:  # the run changed since the page was drawn, or the key
            error, status = str(exc), NOT_APPLICABLE
            refusal = str(exc) if isinstance(exc, NotApplicable) else None
        except WorkflowError as exc:
            error = str(exc)
        else:
            return done(request, fork, f"Forked from run {run.id} at “{entry.name}”: this is the new run.")
    copied, fresh = operations.fork_plan(str(run.id), entry.id) if refusal is None else ([], [])
    return render(
        model_admin,
        request,
        "confirm_fork.html",
        run,
        f"Fork from “{entry.name}”",
        status=status,
        entry=entry,
        copied=copied,
        fresh=fresh,
        form=form,
        error=error,
        blocked=refusal is not None,
        derived=" / ".join(forks.derived_key(list(run.key), run.forks.count() + 1)),
        original_url=reverse("admin:workflows_run_inspect", args=[run.id]),
    )
