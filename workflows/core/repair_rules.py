"""Which operator's repair applies to a run in which status, and why not when it does not.

One table for every surface: the inspector offers only the buttons that apply, the store refuses
the rest (under the run's lock, so a page that is out of date cannot slip one through), and the
admin (409), the API (409 `not_applicable`) and the commands (exit status 1) answer a refusal with
the sentence `why_not` gives. A refused repair changes nothing and writes no audit entry.

    action      applies to a run that is                        not to one that is
    replay      pending, waiting, completed, failed, cancelled  running (a runner holds it now)
    retry_now   pending, waiting, running (a step retrying)     completed, failed, cancelled
    cancel      pending, waiting, running, paused               completed, failed, cancelled
    pause       pending, waiting, running                       paused, completed, failed, cancelled
    resume      paused (or running, asked to pause)             pending, waiting, completed, failed,
                                                                cancelled
"""

from __future__ import annotations

from dataclasses import dataclass

from .exceptions import NotApplicable, RunBusy
from .records import AuditAction, EntryStatus, RunStatus

REPLAY = AuditAction.REPLAY.value
RETRY_NOW = AuditAction.RETRY_NOW.value
CANCEL = AuditAction.CANCEL.value
PAUSE = AuditAction.PAUSE.value
RESUME = AuditAction.RESUME.value
ACTIONS = (REPLAY, RETRY_NOW, CANCEL, PAUSE, RESUME)


@dataclass(frozen=True)
class Repair:
    """What a workflow's `on_repair(c, repair)` hears: an operator's accepted replay (from `step`),
    retry now (of `step`) or fork (heard by the new run: it runs fresh from `step`), by `actor`,
    for `reason`."""

    action: str  # REPLAY, RETRY_NOW or "fork" (`workflows.core.forks.FORK`)
    step: str
    actor: str = ""
    reason: str = ""


_RUN_REFUSALS: dict[tuple[str, str], str] = {
    (REPLAY, RunStatus.RUNNING): (
        "Replay does not apply to a running run: a runner holds it now. "
        "Wait until it waits, fails or finishes, then replay it."
    ),
    (RETRY_NOW, RunStatus.COMPLETED): (
        "Retry now does not apply to a completed run: none of its steps waits to retry."
    ),
    (RETRY_NOW, RunStatus.FAILED): (
        "Retry now does not apply to a failed run: none of its steps will retry by itself. "
        "Replay it from the failed step instead."
    ),
    (RETRY_NOW, RunStatus.CANCELLED): (
        "Retry now does not apply to a cancelled run: it runs no more steps. Replay it to run it again."
    ),
    (CANCEL, RunStatus.COMPLETED): "Cancel does not apply to a completed run: it is already completed.",
    (CANCEL, RunStatus.FAILED): "Cancel does not apply to a failed run: it is already failed.",
    (CANCEL, RunStatus.CANCELLED): "Cancel does not apply to a cancelled run: it is already cancelled.",
    (PAUSE, RunStatus.PAUSED): "Pause does not apply to a paused run: it is already paused.",
    (PAUSE, RunStatus.COMPLETED): "Pause does not apply to a completed run: it runs no more steps.",
    (PAUSE, RunStatus.FAILED): (
        "Pause does not apply to a failed run: it runs no more steps. Replay it to run it again."
    ),
    (PAUSE, RunStatus.CANCELLED): "Pause does not apply to a cancelled run: it runs no more steps.",
    **{
        (RESUME, status): f"Resume does not apply to a {status} run: it is not paused."
        for status in RunStatus
        if status not in (RunStatus.PAUSED, RunStatus.RUNNING)
    },
    (RESUME, RunStatus.RUNNING): "Resume does not apply to a running run: it is not paused.",
}


def why_not(action: str, status: str, *, step: str = "", step_status: str | None = None) -> str | None:
    """None when `action` applies to a run in `status` (and, for retry now, to its step `step` in
    `step_status`); else the sentence that says why it does not."""
    if action not in ACTIONS:
        raise ValueError(f"unknown repair {action!r}; one of {', '.join(ACTIONS)}")
    refusal = _RUN_REFUSALS.get((action, str(status)))
    if refusal is not None:
        return refusal
    if action == RETRY_NOW and step_status is not None and step_status != EntryStatus.RETRYING:
        return (
            f"Retry now does not apply to step “{step}”: it is {step_status}, not waiting to retry, "
            "so there is nothing to hurry."
        )
    return None


def applies(action: str, status: str, *, step_status: str | None = None) -> bool:
    return why_not(action, status, step_status=step_status) is None


def offered(status: str) -> dict[str, bool]:
    """For a run in `status`: each repair, and whether it applies (what the inspector shows)."""
    return {action: applies(action, status) for action in ACTIONS}


def check(action: str, run_id: str, status: str, *, step: str = "", step_status: str | None = None) -> None:
    """Raise NotApplicable (RunBusy for a replay of a running run) when `action` does not apply."""
    refusal = why_not(action, status, step=step, step_status=step_status)
    if refusal is None:
        return
    error = RunBusy if action == REPLAY and status == RunStatus.RUNNING else NotApplicable
    raise error(refusal, action=action, run_id=run_id, status=str(status))
