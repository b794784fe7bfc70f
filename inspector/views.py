"""The operator dashboard: runs live, last hour's throughput and failures, step durations, model
cost by workflow, the backlog and schedule-to-start by workflow; a run opens on the admin's run page. Every view needs
what the admin's run inspector needs (inspector.access)."""

from __future__ import annotations

from django.contrib import admin
from django.core.cache import cache
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from workflows.core.records import RUNNER_DEAD_AFTER_LEASES
from workflows.reads import costs, doctor, limiters, live, stats
from workflows.reads import decisions as decision_reads
from workflows.reads import source as read_source

from . import bulk, groups, pages, runners, workflow_pauses
from .access import view_runs_required
from .actions import choice_url


def _context(request, **extra):
    # The dashboard is wide: no admin nav sidebar.
    return {**admin.site.each_context(request), "is_nav_sidebar_enabled": False, **extra}


@view_runs_required
def dashboard(request):
    # The figures, backlog, decisions and runs read WORKFLOWS["READ_DATABASE"] (a replica, its lag
    # shown); the runners, limiters and groups are the store's reads of what holds now: the primary.
    figures, source = read_source.read(_figures)
    decisions, source = read_source.read(
        lambda using: [_with_buttons(d) for d in decision_reads.awaiting_decision(using=using)], source
    )
    runs, source = read_source.read(
        lambda using: [live.run_summary(r) for r in live.recent_runs(using=using)], source
    )
    return TemplateResponse(
        request,
        "inspector/dashboard.html",
        _context(
            request,
            title="Operator dashboard",
            **figures,
            read_source=source,
            **_presence(),
            runs=runs,
            decisions=decisions,
            limiters=limiters.limiter_use(),
            groups=groups.group_uses(),
            **bulk.recent_context(),
            **workflow_pauses.dashboard_context(request),
        ),
    )


def _figures(using: str) -> dict:
    """The last hour's figures, model costs and the backlog, read from `using`."""
    return {
        "stats": stats.dashboard_stats(using=using),
        "costs": costs.workflow_costs(using=using),
        "backlog": pages.backlog(using=using),
    }


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
        "doctor_findings": doctor_findings(),
    }


DOCTOR_CACHE_KEY, DOCTOR_CACHE_SECONDS = "inspector:doctor-findings", 60


def doctor_findings() -> int:
    """How many kinds of stuck things the doctor's cheap checks find, cached a minute: the
    dashboard refreshes often, and `manage.py workflows doctor` tells the rest."""
    return cache.get_or_set(DOCTOR_CACHE_KEY, lambda: len(doctor.examine(cheap=True)), DOCTOR_CACHE_SECONDS)


def _with_buttons(decision: decision_reads.Decision) -> dict:
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
    figures, source = read_source.read(_figures)
    return TemplateResponse(
        request, "inspector/_stats.html", {**figures, "read_source": source, **_presence()}
    )


@view_runs_required
def run(request, run_id):
    """The run's page is the admin's; the dashboard's old run URL (bookmarks, `reverse`) leads
    there, after the same access check, so a refused user still gets the dashboard's 403."""
    return redirect("admin:workflows_run_inspect", str(run_id))
