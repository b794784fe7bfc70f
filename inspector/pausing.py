"""What a run's page says about a pause: who paused it and why (its latest `pause` audit entry), or
the step that ran out of retries under `on_exhausted="pause"` and its last error; the due time the
run keeps for its resume; a running run asked to pause; and its whole workflow being paused."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from workflows.core.records import TERMINAL, AuditAction, EntryStatus, RunStatus
from workflows.models import AuditEntry, Run, WorkflowPause


@dataclass
class PauseFacts:
    paused: bool  # the run is paused (else only asked to, or only its workflow is)
    asked: bool  # running, asked to pause at its next entry
    by: str = ""  # the operator (the audit entry's actor); empty when a step ran out of retries
    reason: str = ""
    at: dt.datetime | None = None
    due_at: dt.datetime | None = None  # kept for the resume
    exhausted: Any = None  # the step view (inspector.pages.StepView) out of retries
    workflow: WorkflowPause | None = None  # the run's whole workflow is paused


def _exhausted(steps: list[Any]) -> Any:
    """The current step held by on_exhausted="pause": retrying, its error marked `paused`."""
    for view in steps:
        error = view.entry.error if isinstance(view.entry.error, dict) else {}
        if view.entry.status == EntryStatus.RETRYING and error.get("paused"):
            return view
    return None


def pause_facts(run: Run, steps: list[Any], audit: list[AuditEntry]) -> PauseFacts | None:
    """None when nothing about the run is paused. `audit` is the run's log, newest first."""
    asked = run.status == RunStatus.RUNNING and bool(run.pause_requested)
    paused = run.status == RunStatus.PAUSED
    workflow = (
        WorkflowPause.objects.filter(workflow=run.workflow).first() if run.status not in TERMINAL else None
    )
    if not (paused or asked or workflow):
        return None
    facts = PauseFacts(paused=paused, asked=asked, due_at=run.paused_due_at, workflow=workflow)
    exhausted = _exhausted(steps) if paused else None
    if exhausted is not None:
        last = exhausted.attempts[-1].finished_at if exhausted.attempts else exhausted.entry.finished_at
        facts.exhausted, facts.at = exhausted, last
        return facts
    if paused or asked:
        latest = next((a for a in audit if a.action == AuditAction.PAUSE), None)
        if latest is not None:
            facts.by, facts.reason, facts.at = latest.actor, latest.reason, latest.created_at
    return facts
