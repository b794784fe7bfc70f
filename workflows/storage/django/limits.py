"""Limiters in the database: every runner admits attempts through the same rows.

An admission locks the limiter's row (an UPDATE, which also takes SQLite's write lock), reads the
uses still inside the window, decides with `core.limits.decide` (the rule, in pure Python) and
records the new use, all in one transaction: two runners never both take the last slot.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet

from ...core.limits import WINDOW, Grant, Limiter, SlotUse, decide
from ...models import Limiter as LimiterRow
from ...models import LimiterSlot


def acquire(limiter: Limiter, holder: str, expires_at: dt.datetime, now: dt.datetime) -> Grant:
    with transaction.atomic():
        _lock(limiter.name, now)
        horizon = now - WINDOW
        slots = LimiterSlot.objects.filter(limiter=limiter.name)
        slots.filter(acquired_at__lt=horizon).filter(
            Q(released_at__lt=horizon) | Q(released_at__isnull=True, expires_at__lt=horizon)
        ).delete()  # out of every window: forget them
        uses = [
            SlotUse(acquired_at=a, released_at=r, expires_at=e, tokens=t) for a, r, e, t in _live(slots, now)
        ]
        admitted, retry_at, reason = decide(limiter, uses, now)
        if not admitted:
            return Grant(slot=None, retry_at=retry_at, reason=reason)
        slot = LimiterSlot.objects.create(
            limiter=limiter.name, holder=holder[:300], acquired_at=now, expires_at=expires_at
        )
        return Grant(slot=slot.id)


def release(slot: int, tokens: int, now: dt.datetime) -> None:
    LimiterSlot.objects.filter(id=slot, released_at__isnull=True).update(
        released_at=now, tokens=max(0, tokens)
    )


def use(names: list[str], now: dt.datetime) -> dict[str, dict[str, int]]:
    since = now - WINDOW
    figures = {name: {"held": 0, "started": 0, "tokens": 0} for name in names}
    for name, acquired, released, expires, tokens in _live(
        LimiterSlot.objects.filter(limiter__in=names), now, with_name=True
    ):
        row = figures[name]
        row["held"] += released is None and expires > now
        row["started"] += acquired > since
        row["tokens"] += tokens if released is not None and released > since else 0
    return figures


def _live(slots: QuerySet[LimiterSlot], now: dt.datetime, with_name: bool = False) -> Any:
    """The uses a decision counts: started in the window, still held, or released in it."""
    horizon = now - WINDOW
    fields = ["acquired_at", "released_at", "expires_at", "tokens"]
    return slots.filter(
        Q(acquired_at__gt=horizon) | Q(released_at__isnull=True) | Q(released_at__gt=horizon)
    ).values_list(*(["limiter", *fields] if with_name else fields))


def _lock(name: str, now: dt.datetime) -> None:
    if LimiterRow.objects.filter(name=name).update(touched_at=now):
        return
    try:
        with transaction.atomic():  # a savepoint: another runner may create it first
            LimiterRow.objects.create(name=name, touched_at=now)
    except IntegrityError:
        LimiterRow.objects.filter(name=name).update(touched_at=now)
