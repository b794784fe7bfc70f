"""A step whose attempts keep being cut off (say it kills its runner): it fails once its retries
are used up, as an exhausted step would, instead of running forever."""

from __future__ import annotations

from typing import Any

from ..core.exceptions import StepFailed
from ..core.recorder import Recorder
from ..core.records import Commit, EntryKind, EntryStatus, EntryWrite


async def give_up_after_lost_attempts(
    ex: Recorder, scope: str, name: str, position: int, entry_id: int | None, input: Any, attempt: int
) -> None:
    """A step whose attempts keep being cut off (say it kills its runner) fails once its retries
    are used up, as an exhausted step would, instead of running forever."""
    now = ex.clock.now()
    error = {
        "name": "AttemptLost",
        "message": f"step {name!r}: its attempts were cut off {attempt - 1} time(s); no retries are left",
        "kind": "exhausted",
    }
    entry = EntryWrite(
        id=entry_id, scope=scope, position=position, name=name, kind=EntryKind.STEP, status=EntryStatus.FAILED,
        input=input, finished_at=now, attempts=attempt - 1, error=error,
    )  # fmt: skip
    await ex.commit(Commit(entries=[(entry, None)]))
    raise StepFailed(name, "exhausted", error)
