"""A run's timeline: one row per history entry, each a list of bar segments placed in percent of
the run's span. Pure Python over plain values, so it is tested without a database.

A step's row shows each attempt (coloured by outcome) and what followed a failed one: its retry
backoff, or, after an attempt cut off by a crash (outcome `lost`), the time lost until another
attempt began, drawn as lost too (no backoff was ever scheduled); a sleep or a queue wait shows the
time spent waiting; a run in progress shows the time since its last recorded entry as "running"
(the step being executed has no record until it finishes). A run still going is drawn up to `now`.

Idle stretches are compressed so that a day's wait for an approval, or the week between a failure
and its replay, does not squeeze every step into a sliver: a stretch in which no attempt runs,
longer than `MIN_GAP_SECONDS` and longer than all the running time of the run together, is drawn
`GAP_WIDTH` percent wide with a break marker naming its real length (`Timeline.gaps`). Bars that
cross it (the wait itself) stay continuous.
"""

from __future__ import annotations

import bisect
import datetime as dt
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from workflows.core.durations import format_duration
from workflows.reads.steps import attempt_took

__all__ = ["AttemptSpan", "EntrySpan", "Gap", "Row", "Segment", "Timeline", "build_timeline"]
__all__ += ["format_duration"]  # re-exported: the one helper, from workflows.core.durations


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
    left: float  # percent of the track
    width: float  # percent of the track
    title: str


@dataclass(frozen=True)
class Gap:
    """An idle stretch drawn narrower than its length: where, and how long it really was."""

    left: float  # percent of the track
    width: float
    seconds: float
    label: str  # its real length, e.g. "1 d 2 h"


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
    ticks: list[tuple[float, str]]  # (percent, time since the start)
    gaps: list[Gap] = field(default_factory=list)


MIN_WIDTH = 0.4  # percent: an instant still shows as a sliver
MIN_GAP_SECONDS = 60.0  # an idle stretch shorter than this is never compressed
GAP_WIDTH = 5.0  # percent of the track a compressed stretch takes...
GAPS_MAX_WIDTH = 40.0  # ...and all of them together at most
TICK_SPACING = 7.0  # percent: closer ticks would print over each other
BUSY = frozenset({"ok", "error", "timeout", "critical", "lost", "running"})  # an attempt's own time


@dataclass(frozen=True)
class _Piece:
    """One stretch of the axis: real time [a, b] drawn over [left, left + width] percent."""

    a: float  # seconds since the start
    b: float
    left: float
    width: float
    compressed: bool


class _Axis:
    """Seconds since the start -> percent of the track: linear, except in compressed gaps."""

    def __init__(self, span: float, busy: list[tuple[float, float]]) -> None:
        idle = [(a, b) for a, b in _complement(busy, span) if b - a > MIN_GAP_SECONDS]
        running_time = sum(b - a for a, b in _union(busy))
        gaps = [(a, b) for a, b in idle if b - a > running_time]
        linear_total = span - sum(b - a for a, b in gaps)
        gap_width = min(GAP_WIDTH, GAPS_MAX_WIDTH / len(gaps)) if gaps else 0.0
        if gaps and linear_total <= 0:
            gap_width = 100.0 / len(gaps)
        scale = (100.0 - gap_width * len(gaps)) / linear_total if linear_total > 0 else 0.0
        self.pieces: list[_Piece] = []
        left, cursor = 0.0, 0.0
        for a, b in [*gaps, (span, span)]:
            if a > cursor:
                self.pieces.append(_Piece(cursor, a, left, (a - cursor) * scale, False))
                left += (a - cursor) * scale
            if b > a:
                self.pieces.append(_Piece(a, b, left, gap_width, True))
                left += gap_width
            cursor = b
        if not self.pieces:  # an empty run: one instant
            self.pieces.append(_Piece(0.0, span, 0.0, 100.0, False))
        self._starts = [p.a for p in self.pieces]
        self.linear_total = linear_total

    def at(self, seconds: float) -> float:
        i = max(bisect.bisect_right(self._starts, seconds) - 1, 0)
        piece = self.pieces[i]
        share = (seconds - piece.a) / (piece.b - piece.a) if piece.b > piece.a else 0.0
        return min(max(piece.left + min(max(share, 0.0), 1.0) * piece.width, 0.0), 100.0)

    def gaps(self) -> list[Gap]:
        return [
            Gap(round(p.left, 3), round(p.width, 3), p.b - p.a, format_duration(p.b - p.a))
            for p in self.pieces
            if p.compressed
        ]

    def ticks(self) -> list[tuple[float, str]]:
        """Nice round times on the linear stretches, labelled with the time since the start; a
        stretch after a gap starts with a tick of its own (its time since the start), and its
        other ticks count from there ("+20 s"): "1 d" five times over would say nothing."""
        if self.linear_total <= 0:
            return [(0.0, "0")]
        step = _nice_step(self.linear_total)
        ticks: list[tuple[float, str]] = []
        after_gap = False
        for piece in self.pieces:
            if piece.compressed:
                after_gap = True
                continue
            k = 0
            while (t := piece.a + k * step) <= piece.b + 1e-9:
                left = round(self.at(t), 3)
                if after_gap and k == 0 and ticks and left - ticks[-1][0] < TICK_SPACING:
                    ticks.pop()  # where the stretch after a break begins matters more
                if not ticks or left - ticks[-1][0] >= TICK_SPACING:
                    label = format_duration(t) if piece.a == 0 or k == 0 else f"+{format_duration(k * step)}"
                    ticks.append((left, "0" if t == 0 else label))
                k += 1
            after_gap = False
        return ticks


def _union(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _complement(spans: list[tuple[float, float]], span: float) -> list[tuple[float, float]]:
    """The stretches of [0, span] that no span covers."""
    free, cursor = [], 0.0
    for a, b in _union(spans):
        if a > cursor:
            free.append((cursor, min(a, span)))
        cursor = max(cursor, b)
    if cursor < span:
        free.append((cursor, span))
    return free


def _nice_step(span: float, count: int = 5) -> float:
    raw = span / count
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power  # pragma: no cover


@dataclass
class _Bar:
    """A segment in real time, before the axis places it."""

    kind: str
    a: dt.datetime
    b: dt.datetime
    title: str


def _step_bars(e: EntrySpan, now: dt.datetime, row: Row) -> list[_Bar]:
    bars: list[_Bar] = []
    attempts = sorted(e.attempts, key=lambda a: a.number)
    for i, a in enumerate(attempts):
        took = attempt_took(a.outcome, a.started_at, a.finished_at)  # a lost one's says "lost"
        title = (
            f"attempt {a.number}: {took}"
            if a.outcome == "lost"
            else f"attempt {a.number}: {a.outcome}, {took}"
        )
        bars.append(_Bar(a.outcome, a.started_at, max(a.finished_at, a.started_at), title))
        if a.outcome == "ok":
            continue
        following = attempts[i + 1].started_at if i + 1 < len(attempts) else None
        if following is None and e.status in ("retrying", "running") and not e.superseded:
            following = min(now, a.retry_at or now)
            if e.status == "retrying" and a.retry_at is not None and a.retry_at > now:
                row.note = f"next attempt in {format_duration((a.retry_at - now).total_seconds())}"
        ended = max(a.finished_at, a.started_at)  # a lost attempt's lease may lapse before its start
        if following is not None and following > ended:
            waited = format_duration((following - ended).total_seconds())
            if a.outcome == "lost":
                # No backoff was scheduled: the attempt was cut off, and this is the time until
                # a runner noticed (its lease lapsed) and began the next one.
                title = f"lost after attempt {a.number}: {waited} until the next attempt"
                bars.append(_Bar("lost", ended, following, title))
            else:
                title = f"backoff after attempt {a.number}: {waited}"
                bars.append(_Bar("backoff", ended, following, title))
    if e.status == "running" and not e.superseded:
        # An attempt in progress has no record yet: it began when the last one's backoff ended.
        last = attempts[-1] if attempts else None
        begin = (last.retry_at or last.finished_at) if last else e.started_at
        if begin is not None:
            begin = min(begin, now)
            took = format_duration((now - begin).total_seconds())
            number = len(attempts) + 1
            bars.append(_Bar("running", begin, now, f"attempt {number} running for {took}"))
            row.note = f"attempt {number} running"
    elif not attempts and e.started_at is None:
        row.note = "queued to run again"
    return bars


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

    rows: list[Row] = []
    bars: list[list[_Bar]] = []
    last_end: dt.datetime | None = None
    for e in entries:
        row = Row(e.id, e.name, e.kind, e.status, e.superseded)
        row_bars: list[_Bar] = []
        if e.kind == "step":
            row_bars = _step_bars(e, now, row)
        elif e.started_at is not None:
            until = e.finished_at or (now if not e.superseded else e.started_at)
            label = "sleep" if e.kind == "sleep" else "waiting for a message"
            took = format_duration((until - e.started_at).total_seconds())
            row_bars.append(_Bar("wait", e.started_at, until, f"{label}: {took}"))
            if e.finished_at is None and e.wake_at is not None and e.wake_at > now and not e.superseded:
                row.note = f"wakes in {format_duration((e.wake_at - now).total_seconds())}"
        if not e.superseded:
            ends = [t for t in (e.finished_at, *(a.finished_at for a in e.attempts)) if t is not None]
            if ends:
                last_end = max([last_end, *ends]) if last_end else max(ends)
        rows.append(row)
        bars.append(row_bars)

    if running and not any(e.status == "running" and not e.superseded for e in entries):
        since = max(t for t in (last_end, running_since, start) if t is not None)
        row = Row(None, "running…", "step", "running", False)
        took = format_duration((now - since).total_seconds())
        rows.append(row)
        bars.append([_Bar("running", since, max(now, since), f"in progress for {took}")])

    def seconds(t: dt.datetime) -> float:
        return min(max((t - start).total_seconds(), 0.0), span)

    busy = [(seconds(b.a), seconds(b.b)) for row_bars in bars for b in row_bars if b.kind in BUSY]
    axis = _Axis(span, busy)
    for row, row_bars in zip(rows, bars, strict=True):
        for bar in row_bars:
            left, right = axis.at(seconds(bar.a)), axis.at(seconds(bar.b))
            width = max(right - left, MIN_WIDTH)
            left = min(left, 100.0 - width)
            row.segments.append(Segment(bar.kind, round(left, 3), round(width, 3), bar.title))
    return Timeline(start=start, end=stop, rows=rows, ticks=axis.ticks(), gaps=axis.gaps())
