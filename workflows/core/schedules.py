"""Records of cron schedules as a store keeps them, and of the runs a fire starts.

Plain data: the engine (`workflows.engine.schedules`) computes fire times and keys, the store keeps
each schedule's state (next and last fire time, paused, gone) and starts a fire's runs atomically.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

SCHEDULE_STATE = "$schedule"
"""The state key a scheduled run starts with: `{"name": schedule, "fire_time": ISO 8601 text}`."""

REPLACED_EVENT = "$replaced"
"""The event a run replaced by `on_conflict="replace"` gets: `{"by": the new run's id}`."""

LAST_RUNS = 10  # fires a schedule row remembers (newest first), for the admin


@dataclass(frozen=True, kw_only=True)
class ScheduleDeclaration:
    """A schedule as the code declares it, handed to `Store.sync_schedules` by a starting runner.
    `first_fire_at` is its next fire after now: where a new (or re-timed) schedule starts."""

    name: str
    workflow: str
    cron: str
    timezone: str
    catch_up: str  # "skip", "all" or a number of missed fires, as text
    first_fire_at: dt.datetime


@dataclass(frozen=True, kw_only=True)
class ScheduleRecord:
    """A schedule's stored state. `next_fire_at` is the next fire not yet started; `gone` marks a
    schedule no longer declared in code (kept with its history, never fired)."""

    name: str
    workflow: str
    cron: str
    timezone: str
    catch_up: str
    next_fire_at: dt.datetime | None = None
    last_fire_at: dt.datetime | None = None
    paused: bool = False
    gone: bool = False
    paused_at: dt.datetime | None = None
    paused_by: str = ""
    pause_reason: str = ""
    last_runs: list[dict[str, Any]] = field(default_factory=list)  # {"fire_time", "run_id"}, newest first
    created_at: dt.datetime | None = None
    updated_at: dt.datetime | None = None


@dataclass(frozen=True, kw_only=True)
class RunStart:
    """One run a fire starts: get-or-create by (workflow, key), so concurrent fires make one run."""

    workflow: str
    key: list[str]
    version: str
    initial_state: dict[str, Any]
    fire_time: dt.datetime
    concurrency_group: str | None = None  # its workflow's group for the key (workflow(concurrency=...))
    priority: int = 0
