"""How a step reads now, for the pages and the API: its record, read with the run around it.

A step's record is written by the runner executing it, so it says what was true when it was
written: a step waiting to retry still says `retrying` after an operator cancelled its run (the
cancelled run never tries it again), and a running step counts only its finished attempts (the one
in progress has no record until it ends). An attempt cut off by a crash is recorded by the run's next
execution (`recover_cut_attempts`), from what it can know: the attempt's start as best it can tell
and the lapse of the cut runner's lease as its end, which may come before that start (its outcome
is not known, nor when it stopped). The pages and the API show what is true now, through these.
"""

from __future__ import annotations

import datetime as dt

from ..core.durations import format_duration
from ..core.records import EntryStatus, Outcome, RunStatus

GOING_ON = frozenset({EntryStatus.RETRYING, EntryStatus.WAITING, EntryStatus.RUNNING})
CANCELLED = "cancelled"  # a step its cancelled run left waiting to retry, waiting or running


def step_status(entry_status: str, run_status: str, *, superseded: bool = False) -> str:
    """The step's status as shown: `cancelled` for one its cancelled run will never go on with."""
    if run_status == RunStatus.CANCELLED and entry_status in GOING_ON and not superseded:
        return CANCELLED
    return entry_status


def attempts_made(entry_status: str, attempts: int) -> int:
    """Its attempts, the one in progress included (a running step's record counts only those
    that finished)."""
    return attempts + 1 if entry_status == EntryStatus.RUNNING else attempts


def end_known(outcome: str, started_at: dt.datetime, finished_at: dt.datetime) -> bool:
    """Whether the attempt's recorded end is a real one: not a lost attempt's lease lapse that
    comes before (or at) its start."""
    return outcome != Outcome.LOST or finished_at > started_at


def attempt_took(outcome: str, started_at: dt.datetime, finished_at: dt.datetime) -> str:
    """How long the attempt took, as far as its record tells: a lost attempt says "lost", with at
    most how long it can have run when its record allows it (never a zero or negative time)."""
    seconds = (finished_at - started_at).total_seconds()
    if outcome != Outcome.LOST:
        return format_duration(seconds)
    return f"lost after at most {format_duration(seconds)}" if seconds > 0 else "lost"


__all__ = ["CANCELLED", "attempt_took", "attempts_made", "end_known", "step_status"]
