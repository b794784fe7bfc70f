"""The SQL of pauses (`storage.django.pauses`): claims skip paused workflows, a commit tells its
runner of a pause, and the commit that hands a run back leaves it paused when it was asked."""

from __future__ import annotations

from typing import Any

from ....core.records import RunStatus

# Claims skip the runs of paused workflows (`WorkflowPause`: a few rows, read by primary key). A
# paused run needs no test: it has no wake time and its status is not one a claim takes.
NOT_PAUSED = "NOT EXISTS (SELECT 1 FROM workflows_workflowpause p WHERE p.workflow = {name})"
# An operator asked the run to pause, or paused its workflow, since its runner claimed it: the
# runner stops driving it at its next entry (`CommitResult.hold`).
HOLD = f"(pause_requested OR {NOT_PAUSED.format(name='workflows_run.workflow').removeprefix('NOT ')})"


def unless_paused(status: str, wake_at: Any, on_pg: bool) -> tuple[list[str], list[Any]]:
    """A run handed back `status` (waiting, pending) due at `wake_at`, or paused instead when an
    operator asked meanwhile (`pause_requested`): its due time kept in `paused_due_at`."""
    text, when = ("%s::text", "%s::timestamptz") if on_pg else ("%s", "%s")
    sets = [
        f"status = CASE WHEN pause_requested THEN {text} ELSE {text} END",
        f"wake_at = CASE WHEN pause_requested THEN NULL ELSE {when} END",
        f"paused_due_at = CASE WHEN pause_requested THEN {when} ELSE NULL END",
        "lease_owner = ''",
    ]
    return sets, [RunStatus.PAUSED, status, wake_at, wake_at]
