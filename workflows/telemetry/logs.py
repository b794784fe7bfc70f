"""Structured activity logs: one line per run transition and per step attempt, on the logger
`workflows.activity`, through whatever handlers Django's LOGGING gives it.

Levels: a run's lines (running, its transitions, its execution's end) at INFO, a step attempt that
succeeded at DEBUG, anything that went wrong (a failed attempt, a failed run, a lost or abandoned
execution) at WARNING. So INFO grows with runs, not with steps: a line per step was a good share
of a draining runner's CPU, and a busy runner's log is read for its runs and its problems; the
step-by-step trace is the run inspector's, or DEBUG's.

Each line's text reads on its own; its fields ride on the record (`extra`), so a JSON formatter
(`WORKFLOWS_LOG_JSON=1` in this project's settings) writes them as keys: `event`, `run_id`,
`workflow`, and as they apply `step`, `scope`, `attempt`, `outcome`, `status`, `duration_s`,
`retry_delay_s`, `error_type`. Never inputs, outputs, state or error messages: they may hold
secrets. Lines come from what was stored (an observer), so a replay never logs a step again.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

from ..core.records import Commit, Outcome, RunRecord
from ..engine.observers import Observer

LOGGER = "workflows.activity"


_FAILED = {Outcome.ERROR, Outcome.TIMEOUT, Outcome.CRITICAL, Outcome.LOST}


class ActivityLogObserver(Observer):
    """The runner's activity as log lines (see the module)."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger(LOGGER)
        self._started: dict[str, float] = {}  # run id -> monotonic start of its execution

    def execution_started(self, run: RunRecord, *, owner: str, claimed_at: dt.datetime) -> None:
        self._started[run.id] = time.monotonic()
        if not self.logger.isEnabledFor(logging.INFO):
            return
        due = run.wake_at or run.created_at
        delay = round(max(0.0, (claimed_at - due).total_seconds()), 3) if due is not None else None
        how = "first execution" if run.fresh else ("taken over" if run.taken_over else "resumed")
        self._log(
            logging.INFO,
            f"run {run.id} {run.workflow} running ({how})",
            event="run.running", run_id=run.id, workflow=run.workflow, version=run.version,
            status="running", fresh=run.fresh, taken_over=run.taken_over, delay_s=delay, runner=owner,
        )  # fmt: skip

    def committed(self, run: RunRecord, commit: Commit) -> None:
        for write, attempt in commit.entries:
            if attempt is None:
                continue
            failed = attempt.outcome in _FAILED
            level = logging.WARNING if failed else logging.DEBUG  # see the module
            if not self.logger.isEnabledFor(level):
                continue
            duration = round((attempt.finished_at - attempt.started_at).total_seconds(), 3)
            error_type = _error_type(attempt.error) if failed else None
            text = f"run {run.id} {run.workflow} step {write.name} attempt {attempt.number} {attempt.outcome}"
            text += f" in {duration:g}s"
            if error_type:
                text += f" ({error_type})"
            if attempt.delay is not None:
                text += f", retry in {attempt.delay:g}s"
            self._log(
                level, text,
                event="step.attempt", run_id=run.id, workflow=run.workflow, step=write.name,
                scope=write.scope or None, attempt=attempt.number, outcome=attempt.outcome,
                duration_s=duration, retry_delay_s=attempt.delay, error_type=error_type,
            )  # fmt: skip
        transition = commit.transition
        if transition is None:
            return
        level = logging.WARNING if transition.status == "failed" else logging.INFO
        if not self.logger.isEnabledFor(level):
            return
        error_type = _error_type(transition.error)
        text = f"run {run.id} {run.workflow} {transition.status}"
        if error_type:
            text += f" ({error_type})"
        if transition.wake_at is not None:
            text += f" until {transition.wake_at.isoformat()}"
        self._log(
            level, text,
            event="run.transition", run_id=run.id, workflow=run.workflow, status=transition.status,
            error_type=error_type, wake_at=transition.wake_at.isoformat() if transition.wake_at else None,
        )  # fmt: skip

    def execution_ended(self, run: RunRecord, *, status: str, wake_at: dt.datetime | None) -> None:
        started = self._started.pop(run.id, None)
        level = logging.WARNING if status in ("lost", "abandoned") else logging.INFO
        if not self.logger.isEnabledFor(level):
            return
        duration = round(time.monotonic() - started, 3) if started is not None else None
        text = f"run {run.id} {run.workflow} execution ended: {status}"
        if duration is not None:
            text += f" after {duration:g}s"
        self._log(
            level, text,
            event="run.execution_ended", run_id=run.id, workflow=run.workflow, outcome=status,
            duration_s=duration,
        )  # fmt: skip

    def _log(self, level: int, text: str, **fields: Any) -> None:
        self.logger.log(level, text, extra={k: v for k, v in fields.items() if v is not None})


def _error_type(error: dict[str, Any] | None) -> str | None:
    """An error's class name, never its message."""
    name = (error or {}).get("name")
    return name if isinstance(name, str) and name else None
