"""Entries that mark a point in the history and run nothing: rollback checkpoints, versioning
gates (`get_version`) and retired entries (`removed`)."""

from __future__ import annotations

from typing import Any

from ..core.exceptions import BadInput
from ..core.recorder import Recorder, StepRecorder
from ..core.records import EntryKind, EntryStatus, EntryWrite
from ..core.replay import Action, Decision


async def rollback_checkpoint(ex: StepRecorder, scope: str, name: str) -> None:
    decision = ex.enter(scope, name, EntryKind.CHECKPOINT)
    if decision.action == Action.RUN:
        ex.add_pending(_marker(ex, decision, name, EntryKind.CHECKPOINT, None))
    ex.has_checkpoint = True


async def get_version(ex: Recorder, scope: str, name: str, latest: int) -> int:
    """The version this run took at this gate. A run whose history passed this point before the
    gate existed gets 0 (the original code); a new run records `latest`."""
    if not isinstance(latest, int) or latest < 1:
        raise BadInput(f"get_version {name!r}: latest must be an int >= 1")
    ahead = ex.history.peek(scope)
    if ahead is not None and not (ahead.kind == EntryKind.VERSION and ahead.name == name):
        return 0
    decision = ex.enter(scope, name, EntryKind.VERSION)
    if decision.action == Action.REPLAY:
        return int(decision.value)
    ex.add_pending(_marker(ex, decision, name, EntryKind.VERSION, latest))
    return latest


async def removed(ex: Recorder, scope: str, name: str, kind: str) -> None:
    """Retire an entry: runs that recorded it skip over it; new runs record nothing."""
    if kind not in set(EntryKind):
        raise BadInput(f"removed {name!r}: unknown kind {kind!r}")
    ahead = ex.history.peek(scope)
    if ahead is not None and ahead.name == name and ahead.kind == kind:
        ex.history.skip(scope)


def _marker(ex: Recorder, decision: Decision, name: str, kind: EntryKind, output: Any) -> EntryWrite:
    now = ex.clock.now()
    return EntryWrite(
        id=None,
        scope=decision.scope,
        position=decision.position,
        name=name,
        kind=kind,
        status=EntryStatus.COMPLETED,
        output=output,
        started_at=now,
        finished_at=now,
    )
