"""Concurrency groups as operators see them: each group's runs executing against its max and the
runs waiting for a slot (the dashboard), and why one waiting run has not started (its page)."""

from __future__ import annotations

import datetime as dt

from workflows import conf
from workflows.core.concurrency import GroupUse
from workflows.models import Run

GROUPS_SHOWN = 50  # the dashboard lists the busiest groups, at most this many


def group_uses(now: dt.datetime | None = None) -> list[GroupUse]:
    """The groups of the registered workflows that limit their concurrency, with runs executing
    or due, busiest first (the runners share these figures: they are the database's)."""
    caps = conf.registry().concurrency_caps()
    if not caps:
        return []
    store = conf.default_store()  # "executing" means under a live lease: judged on the database's clock
    return store.concurrency_use(caps, now=now or store.shared_clock.now())[:GROUPS_SHOWN]


def slot_wait(run: Run, now: dt.datetime | None = None) -> str | None:
    """ "Waiting for a slot in group G (2/2 running)" for a run that is due but held back because
    its group is full; None otherwise."""
    now = now or conf.default_store().shared_clock.now()
    group = run.concurrency_group
    held = run.held_at is not None or (run.wake_at is not None and run.wake_at <= now)
    if group is None or run.status == Run.Status.RUNNING or not held:
        return None
    cap = conf.registry().concurrency_caps().get(run.workflow)
    if cap is None:
        return None
    running = Run.objects.filter(
        concurrency_group=group, status=Run.Status.RUNNING, wake_at__gt=now, workflow=run.workflow
    ).count()
    if running < cap:
        return None
    return f"Waiting for a slot in group {group} ({running}/{cap} running)"
