"""Reads of runs for the API, the commands and the inspector, each with the joins it needs (the
read model; events after a cursor come from `storage.django.rows.events_after`, shared with the
client and the live consumers).

Lists page with an opaque cursor over (-created_at, -id): a page never shifts when runs are
created meanwhile (new runs sort before the first page), and ties on created_at are broken by id.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import uuid
from dataclasses import dataclass

from django.db.models import Prefetch, Q

from ..core.exceptions import BadInput, RunNotFound
from ..core.keys import key_identity, quoted
from ..core.records import EventRecord
from ..core.retention import PRUNABLE
from ..models import Entry, Run, attempts_in_order
from ..storage.django.rows import events_after

MAX_PAGE = 200  # runs or events per page, at most

__all__ = ["MAX_PAGE", "Kept", "RunPage", "events_after", "run_detail", "run_events", "run_kept", "run_list"]


@dataclass(frozen=True)
class RunPage:
    items: list[Run]
    next_cursor: str | None  # None on the last page


def _run_uuid(run_id: str | uuid.UUID) -> uuid.UUID:
    """A malformed id names no run: RunNotFound, like a missing one."""
    try:
        return run_id if isinstance(run_id, uuid.UUID) else uuid.UUID(str(run_id))
    except ValueError:
        raise RunNotFound(f"no run with id {quoted(str(run_id))}") from None


def _aware(when: dt.datetime) -> dt.datetime:
    """In UTC; a time without an offset is taken as UTC."""
    if when.tzinfo is None:
        return when.replace(tzinfo=dt.UTC)
    try:
        return when.astimezone(dt.UTC)
    except OverflowError:  # e.g. 0001-01-01T00:00+14:00 is before the first representable instant
        raise BadInput(f"time out of range: {when.isoformat()}") from None


def encode_cursor(run: Run) -> str:
    raw = json.dumps([run.created_at.isoformat(), run.id.hex], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[dt.datetime, uuid.UUID]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        created, run_id = json.loads(base64.urlsafe_b64decode(padded.encode()))
        when = dt.datetime.fromisoformat(created)
        if when.tzinfo is None:
            raise ValueError("naive time")
        return _aware(when), uuid.UUID(run_id)
    except (ValueError, TypeError, binascii.Error, UnicodeError):
        raise BadInput(f"invalid cursor {cursor!r}: pass back a next_cursor unchanged") from None


def run_list(
    *,
    workflow: str | None = None,
    status: str | None = None,
    key: list[str] | None = None,
    created_after: dt.datetime | None = None,
    created_before: dt.datetime | None = None,
    cursor: str | None = None,
    limit: int = 50,
    using: str | None = None,
) -> RunPage:
    """Runs newest first, filtered; state and result are left out (read one run for those).
    `using`: the database alias read (`GET /api/runs` may read a replica, workflows.reads.source)."""
    limit = max(1, min(limit, MAX_PAGE))
    runs = Run.objects.using(using).defer("state", "result").order_by("-created_at", "-id")
    if workflow:
        runs = runs.filter(workflow=workflow)
    if status:
        runs = runs.filter(status=status)
    if key:
        runs = runs.filter(key_hash=key_identity(list(key))[1])
    if created_after:
        runs = runs.filter(created_at__gt=_aware(created_after))
    if created_before:
        runs = runs.filter(created_at__lt=_aware(created_before))
    if cursor:
        when, last_id = decode_cursor(cursor)
        runs = runs.filter(Q(created_at__lt=when) | Q(created_at=when, id__lt=last_id))
    rows = list(runs[: limit + 1])
    more = len(rows) > limit
    items = rows[:limit]
    return RunPage(items=items, next_cursor=encode_cursor(items[-1]) if more else None)


def run_detail(run_id: str | uuid.UUID) -> Run:
    """One run with all its entries, current and superseded, in history order, each with its
    attempts (`run.entries.all()`, `entry.attempt_history()`: three queries in all)."""
    entries = Prefetch(
        "entries",
        queryset=Entry.objects.order_by("scope", "position", "id").prefetch_related(attempts_in_order()),
    )
    run = Run.objects.prefetch_related(entries).filter(id=_run_uuid(run_id)).first()
    if run is None:
        raise RunNotFound(f"no run with id {quoted(str(run_id))}")
    return run


def run_events(run_id: str | uuid.UUID, *, after: int = 0, limit: int = 100) -> list[EventRecord]:
    """The run's events with id > after, oldest first; RunNotFound for an unknown run."""
    rid = _run_uuid(run_id)
    if not Run.objects.filter(id=rid).exists():
        raise RunNotFound(f"no run with id {quoted(str(run_id))}")
    return events_after(str(rid), after=after, limit=max(1, min(limit, MAX_PAGE)))


@dataclass(frozen=True)
class Kept:
    """How long a run is kept by WORKFLOWS["RETENTION"]: `until` (None: not due while things
    stand, e.g. a live run or a status kept forever) and the rule, for people."""

    until: dt.datetime | None
    rule: str


def run_kept(run: Run, last_audit_at: dt.datetime | None) -> Kept | None:
    """For a finished run, when pruning will delete it and why; None for a live run (or when
    RETENTION is malformed: `manage.py check` reports that, workflows.E020)."""
    from .. import conf

    try:
        retention = conf.retention()
    except ValueError:
        return None
    if run.status not in PRUNABLE:
        return None
    until = retention.kept_until(run.status, run.finished_at, last_audit_at)
    return Kept(until=until, rule=retention.describe(run.status, audited=last_audit_at is not None))
