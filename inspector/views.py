"""The operator dashboard: runs live, last hour's throughput and failures, step durations, the
backlog and schedule-to-start by workflow, and one run's live timeline. Every view needs what the admin's run inspector needs (inspector.access)."""

from __future__ import annotations

from django.contrib import admin
from django.http import Http404
from django.template.response import TemplateResponse
from django.urls import reverse

from workflows.core.records import RUNNER_DEAD_AFTER_LEASES

from . import dashboard_selectors, groups, runners, selectors
from .access import view_runs_required
from .actions import choice_url


def _context(request, **extra):
    # The dashboard is wide: no admin nav sidebar.
    return {**admin.site.each_context(request), "is_nav_sidebar_enabled": False, **extra}


@view_runs_required
def dashboard(request):
    return TemplateResponse(
        request,
        "inspector/dashboard.html",
        _context(
            request,
            title="Operator dashboard",
            stats=dashboard_selectors.dashboard_stats(),
            backlog=dashboard_selectors.backlog(),
            **_presence(),
            runs=[selectors.run_summary(r) for r in selectors.recent_runs()],
            decisions=[_with_buttons(d) for d in dashboard_selectors.awaiting_decision()],
            limiters=dashboard_selectors.limiter_use(),
            groups=groups.group_uses(),
        ),
    )


def _presence() -> dict:
    """The runners' table and the count of live runs no live runner knows (with the stats)."""
    cover = runners.coverage()
    unserved = runners.unserved_runs(cover)
    return {
        "runners": runners.runner_rows(cover),
        "live_runners": len(cover.live),
        "dead_after_leases": RUNNER_DEAD_AFTER_LEASES,
        "unserved": unserved,
        "unserved_total": sum(unserved.values()),
    }


def _with_buttons(decision: dashboard_selectors.Decision) -> dict:
    """One button per declared choice, each opening the audited send action (confirmation, why,
    permission) with that choice's body prefilled."""
    buttons = [
        {"queue": q.queue, "choice": choice, "url": choice_url(decision.run_id, q.queue, choice)}
        for q in decision.queues
        for choice in q.choices
    ]
    return {"decision": decision, "buttons": buttons}


@view_runs_required
def stats_fragment(request):
    return TemplateResponse(
        request,
        "inspector/_stats.html",
        {
            "stats": dashboard_selectors.dashboard_stats(),
            "backlog": dashboard_selectors.backlog(),
            **_presence(),
        },
    )


def _run_context(request, run_id):
    page = selectors.run_page(str(run_id))
    if page is None:
        raise Http404("no such run")
    return _context(
        request,
        title=f"{page.run.workflow} {' / '.join(page.run.key)}",
        page=page,
        run=page.run,
        run_banner=runners.run_banner(page.run),
        fragment_url=reverse("inspector:run_fragment", args=[page.run.id]),
    )


@view_runs_required
def run(request, run_id):
    return TemplateResponse(request, "inspector/run.html", _run_context(request, run_id))


@view_runs_required
def run_fragment(request, run_id):
    return TemplateResponse(request, "inspector/_run_live.html", _run_context(request, run_id))
