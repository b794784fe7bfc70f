"""A run's timeline: one row per history entry, each a list of bar segments placed in percent of
the run's span. Pure Python over plain values, so it is tested without a database.

A step's row shows each attempt (coloured by outcome) and the backoff that followed a failed one;
a sleep or a queue wait shows the time spent waiting; a run in progress shows the time since its
last recorded entry as "running" (the step being executed has no record until it finishes). A run
still going is drawn up to `now`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True, kw_only=True)
class AttemptSpan:
    number: int
    started_at: dt.datetime
    finished_at: dt.datetime
    outcome: str  # ok | error | timeout | critical | lost (cut off by a crash or a store failure)
    delay: float | None = None
    retry_at: dt.datetime | None = None


@dataclass(frozen=True, kw_only=True)
class EntrySpan:
    id: int
    name: str
    kind: str  # step | sleep | queue
    status: str  # completed | failed | retrying | waiting | running
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    wake_at: dt.datetime | None = None
    superseded: bool = False
    attempts: Sequence[AttemptSpan] = ()


@dataclass(frozen=True)
class Segment:
    kind: str  # ok | error | timeout | critical | lost | backoff | wait | running
    left: float  # percent of the span
    width: float  # percent of the span
    title: str


@dataclass
class Row:
    entry_id: int | None
    name: str
    kind: str
    status: str
    superseded: bool
    segments: list[Segment] = field(default_factory=list)
    note: str = ""


@dataclass
class Timeline:
    start: dt.datetime
    end: dt.datetime
    rows: list[Row]
    ticks: list[tuple[float, str]]


MIN_WIDTH = 0.4  # percent: an instant still shows as a sliver


def format_duration(seconds: float | None) -> str:
    """12 ms, 4.2 s, 3 m 04 s, 2 h 05 m, 1 d 3 h."""
    if seconds is None:
        return "—"
    seconds = max(0.0, float(seconds))
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 10:
        return f"{seconds:.2f} s"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        m, s = divmod(int(seconds), 60)
        return f"{m} m {s:02d} s"
    if seconds < 86400:
        h, rest = divmod(int(seconds), 3600)
        return f"{h} h {rest // 60:02d} m"
    d, rest = divmod(int(seconds), 86400)
    return f"{d} d {rest // 3600} h"


def _nice_step(span: float, count: int = 5) -> float:
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power  # pragma: no cover


def build_timeline(
    entries: Sequence[EntrySpan],
    *,
    start: dt.datetime,
    end: dt.datetime | None,
    now: dt.datetime,
    running: bool = False,
    running_since: dt.datetime | None = None,
) -> Timeline:
    """`end` is the run's finish (None while it goes on: the timeline ends at `now`)."""
    stop = end or now
    for e in entries:  # a record may end after the run's own clock reading; never cut it off
        for t in (e.finished_at, *(a.finished_at for a in e.attempts)):
            if t is not None and t > stop:
                stop = t
    span = max((stop - start).total_seconds(), 0.001)

    def place(a: dt.datetime, b: dt.datetime, kind: str, title: str) -> Segment:
        left = min(max((a - start).total_seconds() / span * 100, 0.0), 100.0)
        right = min(max((b - start).total_seconds() / span * 100, 0.0), 100.0)
        width = max(right - left, MIN_WIDTH)
        left = min(left, 100.0 - width)
        return Segment(kind, round(left, 3), round(width, 3), title)

    rows: list[Row] = []
    last_end: dt.datetime | None = None
    for e in entries:
        row = Row(e.id, e.name, e.kind, e.status, e.superseded)
        if e.kind == "step":
            attempts = sorted(e.attempts, key=lambda a: a.number)
            for i, a in enumerate(attempts):
                took = format_duration((a.finished_at - a.started_at).total_seconds())
                row.segments.append(
                    place(a.started_at, a.finished_at, a.outcome, f"attempt {a.number}: {a.outcome}, {took}")
                )
                if a.outcome == "ok":
                    continue
                following = attempts[i + 1].started_at if i + 1 < len(attempts) else None
                if following is None and e.status in ("retrying", "running") and not e.superseded:
                    following = min(now, a.retry_at or now)
                    if e.status == "retrying" and a.retry_at is not None and a.retry_at > now:
                        row.note = f"next attempt in {format_duration((a.retry_at - now).total_seconds())}"
                if following is not None and following > a.finished_at:
                    waited = format_duration((following - a.finished_at).total_seconds())
                    row.segments.append(
                        place(
                            a.finished_at, following, "backoff", f"backoff after attempt {a.number}: {waited}"
                        )
                    )
            if e.status == "running" and not e.superseded:
                # An attempt in progress has no record yet: it began when the last one's backoff ended.
                last = attempts[-1] if attempts else None
                begin = (last.retry_at or last.finished_at) if last else e.started_at
                if begin is not None:
                    begin = min(begin, now)
                    took = format_duration((now - begin).total_seconds())
                    number = len(attempts) + 1
                    row.segments.append(place(begin, now, "running", f"attempt {number} running for {took}"))
                    row.note = f"attempt {number} running"
            elif not attempts and e.started_at is None:
                row.note = "queued to run again"
        elif e.started_at is not None:
            until = e.finished_at or (now if not e.superseded else e.started_at)
            label = "sleep" if e.kind == "sleep" else "waiting for a message"
            took = format_duration((until - e.started_at).total_seconds())
            row.segments.append(place(e.started_at, until, "wait", f"{label}: {took}"))
            if e.finished_at is None and e.wake_at is not None and e.wake_at > now and not e.superseded:
                row.note = f"wakes in {format_duration((e.wake_at - now).total_seconds())}"
        if not e.superseded:
            ends = [t for t in (e.finished_at, *(a.finished_at for a in e.attempts)) if t is not None]
            if ends:
                last_end = max([last_end, *ends]) if last_end else max(ends)
        rows.append(row)

    if running and not any(e.status == "running" and not e.superseded for e in entries):
        since = max(t for t in (last_end, running_since, start) if t is not None)
        row = Row(None, "running…", "step", "running", False)
        row.segments.append(
            place(
                since,
                max(now, since),
                "running",
                f"in progress for {format_duration((now - since).total_seconds())}",
            )
        )
        rows.append(row)

    step = _nice_step(span)
    ticks = []
    t = 0.0
    while t <= span + 1e-9:
        ticks.append((round(t / span * 100, 3), "0" if t == 0 else format_duration(t)))
        t += step
    return Timeline(start=start, end=stop, rows=rows, ticks=ticks)
