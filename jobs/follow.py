"""Following a job from a terminal: its persisted progress events, read through the client after
a cursor (so nothing is missed across processes or restarts), drawn with a progress bar."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import re
import time
from collections.abc import Iterator
from typing import TextIO

from workflows import LOST_EVENTS, TERMINAL, ChunkRecord, EventRecord, RunHandle, RunRecord

STAGE_ORDER = ("queued", "extracting", "enriching", "summarizing", "publishing", "published")
BAR_WIDTH = 20
POLL = 0.2  # seconds between looks for new events
BRIEF_STREAM = "summarize"  # the summarize step's own stream: the brief as the model writes it
# as jobs.workflows.on_error says it, the delay written by workflows.format_duration
RETRY_RE = re.compile(r" failed \(.*\), retrying in \d[\d.]* (ms|s|min|h|d)( \d+ (s|min|h))?$")
RUNNER_CHECK = 2.0  # seconds between looks at the live runners while the job is not finished
NO_RUNNER_REPEAT = 30.0  # seconds between repeats of "no runner" while none comes


def progress_bar(stage: str) -> str:
    if stage not in STAGE_ORDER:
        return f"[{'?' * BAR_WIDTH}]     "
    done = STAGE_ORDER.index(stage) / (len(STAGE_ORDER) - 1)
    filled = round(BAR_WIDTH * done)
    return f"[{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {round(done * 100):3d}%"


def progress_line(stage: str, detail: str | None) -> str:
    if detail and RETRY_RE.search(detail):
        return f"  ! {detail}"
    if stage == "failed":
        return f"  x FAILED: {detail}"
    line = f"{progress_bar(stage)}  {stage}"
    return f"{line:<40} {detail}" if detail else line


def waited(seconds: float) -> str:
    """A duration for a person: 42s, 3m05s, 2h10m."""
    seconds = max(0, int(seconds))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


class RunnerWatch:
    """Says plainly when no live runner can take the job (none alive, or none that knows its
    workflow) and how long it has waited since it last moved; says so again every
    NO_RUNNER_REPEAT seconds, and once when a runner comes. Looks every RUNNER_CHECK seconds."""

    def __init__(self, handle: RunHandle, out: TextIO) -> None:
        self.handle = handle
        self.out = out
        self.next_check = 0.0
        self.said_at: float | None = None  # when "no runner" was last said

    def check(self, run: RunRecord, last_moved: dt.datetime | None) -> None:
        clock = time.monotonic()
        if run.status in TERMINAL or clock < self.next_check:
            return
        self.next_check = clock + RUNNER_CHECK
        alive = self.handle.runners()
        serving = [r for r in alive if run.workflow in r.workflows]
        if serving:
            if self.said_at is not None:
                self.out.write(f"  runner {serving[0].owner} is up: the job goes on\n")
                self.said_at = None
            return
        if self.said_at is not None and clock - self.said_at < NO_RUNNER_REPEAT:
            return
        self.said_at = clock
        since = last_moved or run.created_at or dt.datetime.now(dt.UTC)
        how_long = waited((dt.datetime.now(dt.UTC) - since).total_seconds())
        if alive:
            serves = ", ".join(sorted({name for r in alive for name in r.workflows})) or "nothing"
            why = f"no live runner knows the workflow {run.workflow} (the {len(alive)} alive serve {serves})"
        else:
            why = "no runner is alive"
        self.out.write(
            f"  ! {why}: the job has waited {how_long} (since {since:%H:%M:%S} UTC) and waits until one"
            " starts: python manage.py runworkflows\n"
        )


class BriefStream:
    """The summarize step's stream, printed as the model writes it. A terminal cannot take back
    what it printed: a retry's new attempt is announced and printed after the partial one."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.cursor = 0
        self.mid_line = False

    def write(self, chunk: ChunkRecord) -> None:
        self.cursor = chunk.id
        if chunk.seq == 0:
            self.end_line()
            if chunk.attempt > 1:
                self.out.write(f"  (attempt {chunk.attempt} writes the brief again)\n")
        self.out.write(chunk.data if isinstance(chunk.data, str) else json.dumps(chunk.data))
        self.mid_line = True

    def end_line(self) -> None:
        if self.mid_line:
            self.out.write("\n")
            self.mid_line = False


def print_event(event: EventRecord, out: TextIO) -> None:
    if event.lost:  # from an attempt a crash cut off: the step ran again
        return
    if event.name == LOST_EVENTS:  # lines already printed came from a cut-off attempt
        steps = ", ".join(sorted({a["step"] for a in event.payload.get("attempts", [])}))
        out.write(f"  (cut off by a crash or a database failure: {steps} runs again)\n")
    elif event.name == "progress" and isinstance(event.payload, dict):
        out.write(progress_line(event.payload.get("stage", "?"), event.payload.get("detail")) + "\n")


@contextlib.contextmanager
def raw_lines(out: TextIO) -> Iterator[None]:
    """Django's command output (OutputWrapper) ends every write with a newline unless the text
    has one: the brief is written a piece at a time, so not while following (every line written
    here ends with its own)."""
    ending = getattr(out, "ending", None)
    if ending is None:
        yield
        return
    out.ending = ""  # type: ignore[attr-defined]
    try:
        yield
    finally:
        out.ending = ending  # type: ignore[attr-defined]


def follow(handle: RunHandle, out: TextIO, *, timeout: float | None = None, poll: float = POLL) -> RunRecord:
    """Print the job's progress, and the brief as the model writes it, until its run finishes;
    returns the finished run. Says so when no live runner can take it."""
    with raw_lines(out):
        return _follow(handle, out, timeout, poll)


def _follow(handle: RunHandle, out: TextIO, timeout: float | None, poll: float) -> RunRecord:
    deadline = None if timeout is None else time.monotonic() + timeout
    run = handle.info()
    out.write(progress_line(run.state.get("stage", "queued"), None) + "\n")
    out.flush()
    cursor = 0
    brief = BriefStream(out)
    runners = RunnerWatch(handle, out)
    last_moved: dt.datetime | None = None  # the last event's time: when the job last made progress
    while True:
        # Read the status before the events: events committed with the final step are then
        # printed before we stop.
        run = handle.info()
        events = handle.events(after=cursor)
        chunks = handle.chunks(BRIEF_STREAM, after=brief.cursor)
        # In the order they were stored: a step's progress line, then its brief, then the next's.
        for _at, _kind, item in sorted(
            [(e.created_at, 0, e) for e in events] + [(c.created_at, 1, c) for c in chunks],
            key=lambda row: (row[0], row[1], row[2].id),
        ):
            if isinstance(item, ChunkRecord):
                brief.write(item)
                continue
            cursor, last_moved = item.id, item.created_at
            brief.end_line()
            print_event(item, out)
        runners.check(run, last_moved)
        out.flush()
        if run.status in TERMINAL and not events and not chunks:
            brief.end_line()
            out.flush()
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"job still {run.status} ({run.state.get('stage')}) after {timeout:g}s")
        if not events and not chunks:
            time.sleep(poll)


def describe(job_id: str, run: RunRecord) -> str:
    """A job as `GET /jobs/{id}` has it: status, what is happening now, then its state."""
    from .submission import job_now  # it reads the models: not at import

    now = job_now(run)
    lines = [f"job {job_id}  run {run.id}  status {run.status}  stage {now['stage']}"]
    if now["detail"]:
        lines.append(f"now: {now['detail']}")
    if now["nextAttemptAt"]:
        lines.append(f"next attempt at {now['nextAttemptAt'].isoformat(timespec='seconds')}")
    return "\n".join([*lines, json.dumps(run.state, indent=2, ensure_ascii=False)])
