"""The runners an operator sees: the live runner processes (from their presence records) with
what they hold and serve, and the live runs no live runner knows (their workflow is served by
nobody, so they would wait in silence). Read for the dashboard and for a run's banner."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.db.models import Count

from workflows import conf
from workflows.core.records import LIVE, RunnerRecord, RunStatus
from workflows.engine.presence import serving
from workflows.engine.runner import CLOCK_WARN_OFFSET
from workflows.models import Run


@dataclass
class RunnerRow:
    owner: str
    host: str
    pid: int
    since: dt.datetime
    last_seen: dt.datetime
    alive: bool
    runs_held: int
    concurrency: int
    workflows: list[str]  # "name (versions)" each
    clock_offset: float | None  # its host's wall clock minus the database's, seconds (None: unknown)

    @property
    def clock_off(self) -> bool:
        """Far enough off that the runner logs a warning: its host's time wants fixing (NTP)."""
        return self.clock_offset is not None and abs(self.clock_offset) > CLOCK_WARN_OFFSET


@dataclass
class Coverage:
    """Who can run what, right now."""

    runners: list[RunnerRecord]
    serving: set[str]  # the workflows some live runner knows
    now: dt.datetime

    @property
    def live(self) -> list[RunnerRecord]:
        return [r for r in self.runners if r.alive(self.now)]

    def last_seen(self) -> dt.datetime | None:
        return max((r.last_seen for r in self.runners), default=None)


def coverage(now: dt.datetime | None = None) -> Coverage:
    """Judged on the database's clock, as runners judge each other: a page served from a host
    whose clock is off still tells live runners from dead ones."""
    store = conf.default_store()
    now = now or store.shared_clock.now()
    runners = store.list_runners()
    return Coverage(runners=runners, serving=serving(runners, now), now=now)


def _known(workflows: dict[str, list[str]]) -> list[str]:
    return [
        f"{name} ({', '.join(v or '—' for v in versions)})" for name, versions in sorted(workflows.items())
    ]


def runner_rows(cover: Coverage) -> list[RunnerRow]:
    """Every runner with a presence record, live ones first; a dead one shows until a runner
    forgets it (a restart on its host at once, otherwise after a day)."""
    held = dict(
        Run.objects.filter(status=RunStatus.RUNNING)
        .order_by()
        .values_list("lease_owner")
        .annotate(n=Count("id"))
        .values_list("lease_owner", "n")
    )
    rows = [
        RunnerRow(
            owner=r.owner,
            host=r.host,
            pid=r.pid,
            since=r.started_at,
            last_seen=r.last_seen,
            alive=r.alive(cover.now),
            runs_held=held.get(r.owner, 0),
            concurrency=r.concurrency,
            workflows=_known(r.workflows),
            clock_offset=r.clock_offset,
        )
        for r in cover.runners
    ]
    return sorted(rows, key=lambda row: (not row.alive, row.since))


def unserved_runs(cover: Coverage) -> dict[str, int]:
    """Live runs (pending, waiting or running) of each workflow no live runner knows."""
    rows = (
        Run.objects.filter(status__in=LIVE)
        .exclude(workflow__in=cover.serving)
        .order_by()
        .values_list("workflow")
        .annotate(n=Count("id"))
        .values_list("workflow", "n")
    )
    return dict(sorted(rows))


def run_banner(run: Run, cover: Coverage | None = None) -> str | None:
    """Why a live run will not move, when no live runner can take it; None when one can."""
    if run.status not in LIVE:
        return None
    cover = cover or coverage()
    if run.workflow in cover.serving:
        return None
    if not cover.live:
        seen = cover.last_seen()
        when = f"; the last one was seen {seen:%Y-%m-%d %H:%M:%S} UTC" if seen else ""
        return f"No runner is alive{when}. This run waits until one starts (manage.py runworkflows)."
    return (
        f"No live runner knows the workflow “{run.workflow}”: this run waits until a runner whose "
        f"registries include it starts (live runners serve {', '.join(sorted(cover.serving)) or 'nothing'})."
    )
