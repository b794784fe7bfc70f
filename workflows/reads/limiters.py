"""Every registered limiter with its use now, as the runners share it (the dashboard's table)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone

from .. import conf
from ..models import Entry


@dataclass
class LimiterUse:
    name: str
    limits: str  # what it allows: "60 req/min, 4 at once"
    held: int  # attempts running under it now
    started: int  # attempts admitted in the last minute
    tokens: int  # tokens recorded in the last minute
    waiting: int  # steps waiting for it


def limiter_use(now: dt.datetime | None = None) -> list[LimiterUse]:
    """Every registered limiter with its use now (the runners share these figures)."""
    limiters = conf.registry().limiters
    if not limiters:
        return []
    now = now or timezone.now()
    names = sorted(limiters)
    figures = conf.default_store().limiter_use(names, now=now)
    waiting = Entry.objects.filter(kind=Entry.Kind.STEP, status=Entry.Status.WAITING, superseded=False)
    return [
        LimiterUse(
            name=name,
            limits=limiters[name].describe(),
            held=figures[name]["held"],
            started=figures[name]["started"],
            tokens=figures[name]["tokens"],
            waiting=waiting.filter(meta__waiting_for__limiter=name).count(),
        )
        for name in names
    ]
