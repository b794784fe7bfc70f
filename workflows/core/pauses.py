"""Paused workflows as the store gives them back (`Store.paused_workflows`)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class WorkflowPauseRecord:
    """A paused workflow: who paused it, when, why, and how many of its runs are paused one by one."""

    workflow: str
    reason: str
    actor: str
    paused_at: dt.datetime
    paused_runs: int = 0
