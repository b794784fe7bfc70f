"""How a step reads now, for the pages and the API: its record, read with the run around it.

A step's record is written by the runner executing it, so it says what was true when it was
written: a step waiting to retry still says `retrying` after an operator cancelled its run (the
cancelled run never tries it again). The pages and the API show what is true now, through these.
"""

from __future__ import annotations

from ..core.records import EntryStatus, RunStatus

GOING_ON = frozenset({EntryStatus.RETRYING, EntryStatus.WAITING, EntryStatus.RUNNING})
CANCELLED = "cancelled"  # a step its cancelled run left waiting to retry, waiting or running


def step_status(entry_status: str, run_status: str, *, superseded: bool = False) -> str:
    """The step's status as shown: `cancelled` for one its cancelled run will never go on with."""
    if run_status == RunStatus.CANCELLED and entry_status in GOING_ON and not superseded:
        return CANCELLED
    return entry_status


__all__ = ["CANCELLED", "step_status"]
