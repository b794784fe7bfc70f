"""The timeline: bars placed in percent of the run's span; retries, backoff and waits visible;
still correct while the run goes on."""

from __future__ import annotations

import datetime as dt

from inspector.timeline import AttemptSpan, EntrySpan, build_timeline, format_duration

T0 = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


def at(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def attempt(number, start, end, outcome, delay=None):
    return AttemptSpan(number=number, started_at=at(start), finished_at=at(end), outcome=outcome, delay=delay,
                       retry_at=at(start + delay) if delay else None)  # fmt: skip


def test_finished_run__attempts_backoff_and_waits_in_percent():
    entries = [
        EntrySpan(id=1, name="fetch", kind="step", status="completed", started_at=at(0), finished_at=at(10),
                  attempts=[attempt(1, 0, 10, "ok")]),
        EntrySpan(id=2, name="extract", kind="step", status="completed", started_at=at(10), finished_at=at(40),
                  attempts=[attempt(1, 10, 20, "error", delay=15), attempt(2, 25, 40, "ok")]),
        EntrySpan(id=3, name="approval", kind="queue", status="completed", started_at=at(40), finished_at=at(100)),
    ]  # fmt: skip
    timeline = build_timeline(entries, start=T0, end=at(100), now=at(500))
    fetch, extract, wait = timeline.rows
    assert [(s.kind, s.left, s.width) for s in fetch.segments] == [("ok", 0.0, 10.0)]
    assert [(s.kind, s.left, s.width) for s in extract.segments] == [
        ("error", 10.0, 10.0),
        ("backoff", 20.0, 5.0),
        ("ok", 25.0, 15.0),
    ]
    assert [(s.kind, s.left, s.width) for s in wait.segments] == [("wait", 40.0, 60.0)]
    assert timeline.ticks[0] == (0.0, "0") and timeline.ticks[-1][0] == 100.0


def test_run_in_progress__drawn_up_to_now_with_its_pending_retry_and_wait():
    entries = [
        EntrySpan(id=1, name="call", kind="step", status="retrying", started_at=at(0), finished_at=at(5),
                  wake_at=at(65), attempts=[attempt(1, 0, 5, "error", delay=65)]),
    ]  # fmt: skip
    timeline = build_timeline(entries, start=T0, end=None, now=at(20))
    (row,) = timeline.rows
    assert [(s.kind, s.left, s.width) for s in row.segments] == [
        ("error", 0.0, 25.0),
        ("backoff", 25.0, 75.0),
    ]
    assert row.note == "next attempt in 45.0 s"

    sleeping = [
        EntrySpan(
            id=2,
            name="nap",
            kind="sleep",
            status="waiting",
            started_at=at(0),
            finished_at=None,
            wake_at=at(90),
        )
    ]
    (nap,) = build_timeline(sleeping, start=T0, end=None, now=at(30)).rows
    assert [(s.kind, s.left, s.width) for s in nap.segments] == [("wait", 0.0, 100.0)]
    assert nap.note == "wakes in 1 m 00 s"


def test_running_run__the_unrecorded_step_shows_as_running_since_the_last_record():
    entries = [
        EntrySpan(id=1, name="fetch", kind="step", status="completed", started_at=at(0), finished_at=at(4),
                  attempts=[attempt(1, 0, 4, "ok")]),
    ]  # fmt: skip
    timeline = build_timeline(entries, start=T0, end=None, now=at(10), running=True, running_since=at(0))
    running = timeline.rows[-1]
    assert running.status == "running"
    assert [(s.kind, s.left, s.width) for s in running.segments] == [("running", 40.0, 60.0)]


def test_superseded_records_stay_as_faded_history():
    entries = [
        EntrySpan(id=1, name="publish", kind="step", status="failed", started_at=at(0), finished_at=at(1),
                  superseded=True, attempts=[attempt(1, 0, 1, "critical")]),
        EntrySpan(id=2, name="publish", kind="step", status="completed", started_at=at(8), finished_at=at(10),
                  attempts=[attempt(1, 8, 10, "ok")]),
    ]  # fmt: skip
    old, new = build_timeline(entries, start=T0, end=at(10), now=at(10)).rows
    assert old.superseded and [s.kind for s in old.segments] == ["critical"]
    assert not new.superseded and [s.kind for s in new.segments] == ["ok"]


def test_an_instant_still_shows_and_stays_inside_the_track():
    entries = [EntrySpan(id=1, name="x", kind="step", status="completed", started_at=at(100), finished_at=at(100),
                         attempts=[attempt(1, 100, 100, "ok")])]  # fmt: skip
    (row,) = build_timeline(entries, start=T0, end=at(100), now=at(100)).rows
    (segment,) = row.segments
    assert segment.width > 0 and segment.left + segment.width <= 100.0


def test_format_duration():
    assert [format_duration(s) for s in (0.012, 4.2, 42.0, 184, 7500, 97200, None)] == [
        "12 ms", "4.20 s", "42.0 s", "3 m 04 s", "2 h 05 m", "1 d 3 h", "—",
    ]  # fmt: skip


def test_a_slow_step_in_progress_shows_its_running_attempt_after_the_backoff():
    entries = [
        EntrySpan(id=1, name="extract", kind="step", status="running", started_at=at(0), finished_at=None,
                  attempts=[attempt(1, 0, 10, "error", delay=20)]),
    ]  # fmt: skip
    timeline = build_timeline(entries, start=T0, end=None, now=at(40), running=True, running_since=at(0))
    assert len(timeline.rows) == 1  # the entry itself shows the running attempt
    (row,) = timeline.rows
    assert [(s.kind, s.left, s.width) for s in row.segments] == [
        ("error", 0.0, 25.0),
        ("backoff", 25.0, 25.0),
        ("running", 50.0, 50.0),
    ]
    assert row.note == "attempt 2 running"


def test_a_lost_attempt__drawn_as_lost_then_the_gap_until_the_next_attempt():
    entries = [
        EntrySpan(id=1, name="publish", kind="step", status="completed", started_at=at(0), finished_at=at(50),
                  attempts=[attempt(1, 0, 30, "lost"), attempt(2, 40, 50, "ok")]),
    ]  # fmt: skip
    (row,) = build_timeline(entries, start=T0, end=at(50), now=at(60)).rows
    assert [(s.kind, s.left, s.width) for s in row.segments] == [
        ("lost", 0.0, 60.0),
        ("backoff", 60.0, 20.0),
        ("ok", 80.0, 20.0),
    ]
    assert "attempt 1: lost" in row.segments[0].title
