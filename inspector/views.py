"""The operator dashboard (staff only): runs live, last hour's throughput and failures, step
durations, and one run's live timeline."""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse

from . import selectors


def _context(request, **extra):
    # The dashboard is wide: no admin nav sidebar.
    return {**admin.site.each_context(request), "is_nav_sidebar_enabled": False, **extra}


@staff_member_required
def dashboard(request):
    return TemplateResponse(
        request,
        "inspector/dashboard.html",
        _context(
            request,
            title="Operator dashboard",
            stats=selectors.dashboard_stats(),
            runs=[selectors.run_summary(r) for r in selectors.recent_runs()],
            decisions=_with_decision_links(request, selectors.awaiting_decision()),
        ),
    )


def _with_decision_links(request, decisions: list[dict]) -> list[dict]:
    """Approve / reject open the audited send action (confirmation, why, permission) prefilled."""
    for decision in decisions:
        url = reverse("admin:workflows_run_send", args=[decision["run_id"]])
        for verdict in ("approve", "reject"):
            body = json.dumps({"decision": verdict, "by": request.user.get_username()})
            decision[verdict] = f"{url}?{urlencode({'queue': selectors.DECISION_QUEUE, 'body': body})}"
    return decisions


@staff_member_required
def stats_fragment(request):
    return TemplateResponse(request, "inspector/_stats.html", {"stats": selectors.dashboard_stats()})


def _run_context(request, run_id):
    page = selectors.run_page(str(run_id))
    if page is None:
        raise Http404("no such run")
    return _context(
        request,
        title=f"{page.run.workflow} {' / '.join(page.run.key)}",
        page=page,
        run=page.run,
        fragment_url=reverse("inspector:run_fragment", args=[page.run.id]),
    )


@staff_member_required
def run(request, run_id):
    return TemplateResponse(request, "inspector/run.html", _run_context(request, run_id))


@staff_member_required
def run_fragment(request, run_id):
    return TemplateResponse(request, "inspector/_run_live.html", _run_context(request, run_id))
