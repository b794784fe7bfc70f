"""Following a job from a terminal: its persisted progress events, read through the client after
a cursor (so nothing is missed across processes or restarts), drawn with a progress bar."""

from __future__ import annotations

import json
import re
import time
from typing import TextIO

from workflows.core.records import LOST_EVENTS, TERMINAL, RunRecord
from workflows.engine.client import RunHandle

STAGE_ORDER = ("queued", "extracting", "enriching", "summarizing", "publishing", "published")
BAR_WIDTH = 20
POLL = 0.2  # seconds between looks for new events
# as jobs.workflows.on_error says it, the delay written by workflows.core.durations.format_duration
RETRY_RE = re.compile(r" failed \(.*\), retrying in \d[\d.]* (ms|s|min|h|d)( \d+ (s|min|h))?$")


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


def follow(handle: RunHandle, out: TextIO, *, timeout: float | None = None, poll: float = POLL) -> RunRecord:
    """Print the job's progress until its run finishes; returns the finished run."""
    deadline = None if timeout is None else time.monotonic() + timeout
    run = handle.info()
    out.write(progress_line(run.state.get("stage", "queued"), None) + "\n")
    out.flush()
    cursor = 0
    while True:
        # Read the status before the events: events committed with the final step are then
        # printed before we stop.
        run = handle.info()
        events = handle.events(after=cursor)
        for event in events:
            cursor = event.id
            if event.lost:  # from an attempt a crash cut off: the step ran again
                continue
            if event.name == LOST_EVENTS:  # lines already printed came from a cut-off attempt
                steps = ", ".join(sorted({a["step"] for a in event.payload.get("attempts", [])}))
                out.write(f"  (cut off by a crash or a database failure: {steps} runs again)\n")
            elif event.name == "progress" and isinstance(event.payload, dict):
                out.write(progress_line(event.payload.get("stage", "?"), event.payload.get("detail")) + "\n")
        out.flush()
        if run.status in TERMINAL and not events:
            return run
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"job still {run.status} ({run.state.get('stage')}) after {timeout:g}s")
        if not events:
            time.sleep(poll)


def describe(job_id: str, run: RunRecord) -> str:
    state = json.dumps(run.state, indent=2, ensure_ascii=False)
    return f"job {job_id}  run {run.id}  status {run.status}  stage {run.state.get('stage')}\n{state}"
