"""The timeline: bars placed in percent of the run's span; retries, backoff and waits visible;
still correct while the run goes on; long idle stretches compressed behind a break marker."""

from __future__ import annotations

import datetime as dt

from inspector.timeline import GAP_WIDTH, AttemptSpan, EntrySpan, build_timeline

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
    assert row.note == "next attempt in 45 s"

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
    assert nap.note == "wakes in 1 min"


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
        ("lost", 60.0, 20.0),  # no backoff was scheduled: the time until a runner took over
        ("ok", 80.0, 20.0),
    ]
    assert "attempt 1: lost" in row.segments[0].title
    assert row.segments[1].title == "lost after attempt 1: 10 s until the next attempt"
    assert "backoff" not in " ".join(s.title for s in row.segments)


def test_a_day_long_wait_is_compressed_behind_a_break_that_names_its_length():
    entries = [
        EntrySpan(id=1, name="draft", kind="step", status="completed", started_at=at(0), finished_at=at(6),
                  attempts=[attempt(1, 0, 2, "error", delay=1), attempt(2, 3, 6, "ok")]),
        EntrySpan(id=2, name="wait-approval", kind="queue", status="completed", started_at=at(6),
                  finished_at=at(6 + 86400)),
        EntrySpan(id=3, name="publish", kind="step", status="completed", started_at=at(86406),
                  finished_at=at(86410), attempts=[attempt(1, 86406, 86410, "ok")]),
    ]  # fmt: skip
    timeline = build_timeline(entries, start=T0, end=at(86410), now=at(86410))
    (gap,) = timeline.gaps
    assert (gap.seconds, gap.label, gap.width) == (86400.0, "1 d", GAP_WIDTH)
    draft, wait, publish = timeline.rows
    # The 10 s of work share the rest of the track in proportion, as if the day had not passed.
    scale = (100 - GAP_WIDTH) / 10
    assert [(s.kind, s.left, s.width) for s in draft.segments] == [
        ("error", 0.0, round(2 * scale, 3)),
        ("backoff", round(2 * scale, 3), round(1 * scale, 3)),
        ("ok", round(3 * scale, 3), round(3 * scale, 3)),
    ]
    (bar,) = wait.segments
    # The wait is drawn through the break.
    assert (bar.kind, bar.left, bar.width) == ("wait", round(6 * scale, 3), GAP_WIDTH)
    assert bar.title == "waiting for a message: 1 d"
    (ok,) = publish.segments
    assert (ok.left, round(ok.left + ok.width, 3)) == (round(6 * scale + GAP_WIDTH, 3), 100.0)
    # The axis: times since the start, the stretch after the break starting with its own tick.
    assert timeline.ticks[0] == (0.0, "0")
    assert (round(6 * scale + GAP_WIDTH, 3), "1 d") in timeline.ticks
    assert [label for _, label in timeline.ticks if label.startswith("+")] == ["+2 s", "+4 s"]


def test_a_replay_a_week_after_the_failure__the_idle_week_is_one_break():
    entries = [
        EntrySpan(id=1, name="charge", kind="step", status="failed", started_at=at(0), finished_at=at(1),
                  superseded=True, attempts=[attempt(1, 0, 1, "critical")]),
        EntrySpan(id=2, name="charge", kind="step", status="completed", started_at=at(604800),
                  finished_at=at(604802), attempts=[attempt(1, 604800, 604802, "ok")]),
    ]  # fmt: skip
    timeline = build_timeline(entries, start=T0, end=at(604802), now=at(604802))
    (gap,) = timeline.gaps
    assert gap.label == "7 d" and gap.left == round((100 - GAP_WIDTH) / 3, 3)
    old, new = timeline.rows
    assert old.segments[0].width == round((100 - GAP_WIDTH) / 3, 3)
    assert new.segments[0].width == round(2 * (100 - GAP_WIDTH) / 3, 3)


def test_idle_time_comparable_to_the_work_is_drawn_to_scale():
    """Short backoffs, or waits no longer than the work around them, are part of the story: no break."""
    entries = [
        EntrySpan(id=1, name="extract", kind="step", status="completed", started_at=at(0), finished_at=at(200),
                  attempts=[attempt(1, 0, 60, "error", delay=90), attempt(2, 150, 200, "ok")]),
    ]  # fmt: skip
    timeline = build_timeline(entries, start=T0, end=at(200), now=at(200))
    assert timeline.gaps == []
    assert [s.kind for s in timeline.rows[0].segments] == ["error", "backoff", "ok"]
    assert timeline.rows[0].segments[1].width == 45.0


def test_a_lost_attempt_whose_lease_lapsed_before_its_start__no_negative_or_zero_time():
    entries = [
        EntrySpan(id=1, name="call", kind="step", status="completed", started_at=at(0), finished_at=at(50),
                  attempts=[attempt(1, 20, 12, "lost"), attempt(2, 30, 30, "lost"), attempt(3, 40, 50, "ok")]),
    ]  # fmt: skip
    [row] = build_timeline(entries, start=T0, end=at(50), now=at(60)).rows
    titles = [s.title for s in row.segments]
    assert titles[0] == "attempt 1: lost" and "attempt 2: lost" in titles
    assert not any("0 ms" in t or "-" in t for t in titles)
    assert "lost after attempt 1: 10 s until the next attempt" in titles  # from its start, not before
