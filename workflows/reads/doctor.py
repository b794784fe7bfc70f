"""The doctor's checks: what is stuck, found without SQL (`manage.py workflows doctor`, the
dashboard's count, the runner's `workflows_doctor_findings` gauge).

Each check is one bounded read that an index serves (the runs' wake, held, executing and parent
indexes, the pending-message index, the small presence, limiter-slot and schedule tables) and
gives a `Finding`: what kind, why it matters, a sample of the runs it concerns and how many
there are (counted up to COUNT_CAP). Judged on the database's clock, as runners judge each other.
The repairs are `workflows.doctor`'s; these only read.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from django.db.models import Exists, F, OuterRef, Q, QuerySet, Value
from django.db.models.functions import Concat

from .. import conf
from ..core.exceptions import WorkflowError
from ..core.records import (
    CHILD_QUEUE_PREFIX,
    LIVE,
    RUNNER_DEAD_AFTER_LEASES,
    TERMINAL,
    EntryKind,
    EntryStatus,
    RunnerRecord,
    RunStatus,
)
from ..engine.presence import serving
from ..models import Entry, LimiterSlot, Message, Run, Schedule

SAMPLE = 20  # run ids shown per finding by default
COUNT_CAP = 10_000  # a finding's count stops here ("10000+"): counting must stay cheap
MIN_GRACE = dt.timedelta(seconds=60)

UNSERVED = "unserved_workflow"
DEAD_LEASE = "dead_runner_lease"
LAPSED_LEASE = "lapsed_lease"
PARKED = "parked_runs"
LIMITER_SLOT = "limiter_slot"
FINISHED_MESSAGES = "messages_to_finished_runs"
OVERDUE_SCHEDULE = "overdue_schedule"
CHILD_REPORT = "parent_waits_on_finished_child"
UNKNOWN_VERSION = "unknown_version"


@dataclass(frozen=True)
class Finding:
    """One kind of stuck thing: `run_ids` is a sample (at most the limit asked for) of `count`
    runs (`capped`: at least that many); `subjects` names what is not a run (a schedule, a
    limiter slot). `fixable`: `workflows doctor --fix` repairs it; otherwise it is left for a person."""

    kind: str
    title: str
    explanation: str
    run_ids: list[str]
    count: int
    fixable: bool
    capped: bool = False
    subjects: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Situation:
    """What the checks judge against: the database's time, the runners' presence, the versions
    deployed code knows, and how long past due counts as stuck (`grace`)."""

    now: dt.datetime
    runners: list[RunnerRecord]
    versions: dict[str, set[str]]  # workflow -> versions some live runner or this process knows
    grace: dt.timedelta
    sample: int = SAMPLE

    @property
    def live_owners(self) -> list[str]:
        return [r.owner for r in self.runners if r.alive(self.now)]

    @property
    def serving(self) -> set[str]:
        return serving(self.runners, self.now)


def situation(*, sample: int = SAMPLE, now: dt.datetime | None = None) -> Situation:
    """The situation now. `grace`: a dead runner's time (RUNNER_DEAD_AFTER_LEASES leases), at
    least a minute, so nothing a runner is about to do on its own counts as stuck."""
    store = conf.default_store()
    now = now or store.shared_clock.now()
    runners = store.list_runners()
    versions: dict[str, set[str]] = {}
    for runner in runners:
        if runner.alive(now):
            for name, known in runner.workflows.items():
                versions.setdefault(name, set()).update(known)
    try:
        for name, known in conf.registry().versions().items():
            versions.setdefault(name, set()).update(known)
    except (WorkflowError, ImportError, ValueError):  # no registries configured here: the runners' word
        pass
    grace = max(MIN_GRACE, dt.timedelta(seconds=RUNNER_DEAD_AFTER_LEASES * conf.lease_seconds()))
    return Situation(now=now, runners=runners, versions=versions, grace=grace, sample=sample)


def _finding(
    kind: str, title: str, explanation: str, runs: QuerySet, s: Situation, *, fixable: bool
) -> Finding:
    """A finding over `runs` (a query of Run): its first ids and its capped count."""
    ids = [str(i) for i in runs.order_by().values_list("id", flat=True)[: s.sample]]
    count = len(ids) if len(ids) < s.sample else runs.order_by()[:COUNT_CAP].count()
    return Finding(kind, title, explanation, ids, count, fixable, capped=count >= COUNT_CAP)


def unserved_runs(s: Situation) -> QuerySet:
    return Run.objects.filter(wake_at__lte=s.now, status__in=LIVE).exclude(workflow__in=s.serving)


def unserved_workflow(s: Situation) -> Finding:
    names = sorted(s.serving)
    return _finding(
        UNSERVED,
        "runs due that no live runner serves",
        "due now, but no live runner registers their workflow"
        f" (live runners serve: {', '.join(names) or 'nothing'}); start a runner whose registries include it",
        unserved_runs(s),
        s,
        fixable=False,
    )


def dead_lease_runs(s: Situation) -> QuerySet:
    """Running under a lease that has not run out, held by no live runner: it would wait out the lease."""
    return Run.objects.filter(status=RunStatus.RUNNING, wake_at__gt=s.now).exclude(
        lease_owner__in=s.live_owners
    )


def dead_runner_lease(s: Situation) -> Finding:
    return _finding(
        DEAD_LEASE,
        "leases held by dead runners",
        "held by a runner that is no longer alive; --fix ends the lease so another runner claims the run now",
        dead_lease_runs(s),
        s,
        fixable=True,
    )


def lapsed_lease(s: Situation) -> Finding:
    runs = Run.objects.filter(status=RunStatus.RUNNING, wake_at__lt=s.now - s.grace)
    return _finding(
        LAPSED_LEASE,
        "leases lapsed long ago, never claimed",
        f"their runner's lease ran out more than {s.grace.total_seconds():.0f} s ago and no runner has"
        " claimed them: is a runner serving their workflow running?",
        runs,
        s,
        fixable=False,
    )


def stuck_groups(s: Situation, limit: int = 100) -> list[str]:
    """Concurrency groups with runs set aside (held index) but none executing and none due: no
    run will leave `running` to put one back."""
    held = (
        Run.objects.filter(held_at__isnull=False, wake_at__isnull=True, status__in=LIVE)
        .order_by()
        .values_list("concurrency_group", flat=True)
        .distinct()[:limit]
    )
    groups = [g for g in held if g]
    moving = Run.objects.filter(concurrency_group=OuterRef("concurrency_group")).filter(
        Q(status=RunStatus.RUNNING) | Q(wake_at__lte=s.now)
    )
    blocked = (
        Run.objects.filter(concurrency_group__in=groups, held_at__isnull=False)
        .filter(~Exists(moving))
        .order_by()
        .values_list("concurrency_group", flat=True)
        .distinct()
    )
    return sorted({g for g in blocked if g})


def parked_runs_of(groups: list[str]) -> QuerySet:
    return Run.objects.filter(
        concurrency_group__in=groups, held_at__isnull=False, wake_at__isnull=True, status__in=LIVE
    )


def parked_runs(s: Situation) -> Finding:
    groups = stuck_groups(s)
    found = _finding(
        PARKED,
        "runs set aside in a concurrency group, never put back",
        "set aside while their group was full, but no run of the group executes or is due to put them"
        " back; --fix puts them back in line (a full group sets the extra ones aside again)",
        parked_runs_of(groups),
        s,
        fixable=True,
    )
    return Finding(**{**found.as_dict(), "subjects": groups})


def expired_slots(s: Situation) -> QuerySet:
    return LimiterSlot.objects.filter(released_at__isnull=True, expires_at__lt=s.now - s.grace)


def limiter_slot(s: Situation) -> Finding:
    slots = expired_slots(s)
    rows = list(slots.order_by("id").values_list("limiter", "holder")[: s.sample])
    count = len(rows) if len(rows) < s.sample else slots[:COUNT_CAP].count()
    return Finding(
        LIMITER_SLOT,
        "limiter slots never released",
        "taken by an attempt whose runner died before releasing them (they stopped counting at their"
        " expiry); --fix marks them released",
        sorted({holder.split(":", 1)[0] for _, holder in rows}),
        count,
        True,
        capped=count >= COUNT_CAP,
        subjects=[f"{limiter}: {holder}" for limiter, holder in rows],
    )


def messages_to_finished_runs(s: Situation) -> Finding:
    runs = Run.objects.filter(
        status__in=TERMINAL, id__in=Message.objects.filter(consumed_at__isnull=True).values("run_id")
    )
    return _finding(
        FINISHED_MESSAGES,
        "messages to finished runs",
        "unconsumed messages on runs that have ended: nothing will read them unless the run is"
        " replayed (`workflows replay`); for a person to judge",
        runs,
        s,
        fixable=False,
    )


def overdue_schedule(s: Situation) -> Finding:
    due = Schedule.objects.filter(paused=False, gone=False, next_fire_at__lt=s.now - s.grace)
    names = list(due.order_by("next_fire_at").values_list("name", "next_fire_at")[: s.sample])
    count = len(names) if len(names) < s.sample else due.count()
    return Finding(
        OVERDUE_SCHEDULE,
        "schedules whose next fire is in the past",
        f"their next fire is over {s.grace.total_seconds():.0f} s late: no live runner that declares"
        " them is running (see `workflows schedules`)",
        [],
        count,
        False,
        subjects=[f"{name} (due {when:%Y-%m-%d %H:%M:%S} UTC)" for name, when in names],
    )


def waiting_children(s: Situation) -> QuerySet:
    """Finished children whose live parent still waits on their `child` entry, with no report
    on the entry's queue: the parent would wait forever."""
    waiting = Entry.objects.annotate(
        queue=Concat(Value(CHILD_QUEUE_PREFIX), F("scope"), Value("/"), F("name"))
    ).filter(
        run_id=OuterRef("parent_id"), kind=EntryKind.CHILD, status=EntryStatus.WAITING,
        superseded=False, queue=OuterRef("parent_queue"),
    )  # fmt: skip
    report = Message.objects.filter(
        run_id=OuterRef("parent_id"), queue=OuterRef("parent_queue"), consumed_at__isnull=True
    )
    return Run.objects.filter(
        parent__isnull=False, status__in=TERMINAL, parent__status__in=LIVE, parent_queue__isnull=False
    ).filter(Exists(waiting), ~Exists(report))


def parent_waits_on_finished_child(s: Situation) -> Finding:
    children = waiting_children(s)
    return _finding(
        CHILD_REPORT,
        "parents waiting on a finished child",
        "the child has ended but its report never reached the parent; --fix sends the parent the"
        " child's outcome, as the child's last commit would have",
        Run.objects.filter(id__in=children.values("parent_id")),
        s,
        fixable=True,
    )


def unknown_version_runs(s: Situation) -> QuerySet:
    """Runs a runner will take (a wake time) whose version no deployed code registers."""
    unknown = Q()
    for name, known in s.versions.items():
        unknown |= Q(workflow=name) & ~Q(version__in=sorted(known))
    if not s.versions:
        return Run.objects.none()
    return Run.objects.filter(wake_at__isnull=False, status__in=LIVE).exclude(version="").filter(unknown)


def unknown_version(s: Situation) -> Finding:
    return _finding(
        UNKNOWN_VERSION,
        "runs of a version no deployed code has",
        "their recorded version is registered by no live runner (nor this process): the latest"
        " definition would run them and may diverge from their history; deploy that version or"
        " replay them",
        unknown_version_runs(s),
        s,
        fixable=False,
    )


CHEAP: list[Callable[[Situation], Finding]] = [
    unserved_workflow, dead_runner_lease, lapsed_lease, parked_runs, limiter_slot, overdue_schedule,
]  # fmt: skip
ALL: list[Callable[[Situation], Finding]] = [
    *CHEAP, parent_waits_on_finished_child, messages_to_finished_runs, unknown_version,
]  # fmt: skip
CHEAP_KINDS = [UNSERVED, DEAD_LEASE, LAPSED_LEASE, PARKED, LIMITER_SLOT, OVERDUE_SCHEDULE]
KINDS = [*CHEAP_KINDS, CHILD_REPORT, FINISHED_MESSAGES, UNKNOWN_VERSION]


def examine(s: Situation | None = None, *, cheap: bool = False) -> list[Finding]:
    """The findings (count > 0) of every check, or of the cheap ones only (the dashboard's and
    the runner's: the small tables and the wake, held and executing indexes)."""
    s = s or situation()
    return [f for f in (check(s) for check in (CHEAP if cheap else ALL)) if f.count]
