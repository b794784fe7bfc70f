"""Cron schedules declared in code: `schedule("0 9 * * 1-5", "report", timezone="Europe/Paris")`,
registered with `setup(use={...}, schedules=[...])`. A declaration is checked at once (a bad
expression, timezone, catch-up policy or key function is a clear error naming the schedule), and
knows its fire times and the run each fire starts; `workflows.engine.scheduler` fires them.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..core.exceptions import InvalidKey
from ..core.jsonvalue import unstorable
from ..core.keys import validate_key
from ..core.schedules import SCHEDULE_STATE, RunStart, ScheduleDeclaration

if TYPE_CHECKING:
    from .definition import Workflow

CatchUp = str | int
KeyFunction = Callable[[dt.datetime], list[str] | tuple[str, ...]]

DEFAULT_CATCH_UP = "skip"
MAX_NAME = 200  # characters: the schedule table's name column
MAX_CATCH_UP = 1000  # "all" starts at most this many missed fires at once
_TICK = dt.timedelta(microseconds=1)


def croniter(expression: str, start: dt.datetime | None = None) -> Any:
    """croniter's iterator, imported on first use: it costs every process that imports
    `workflows` a tenth of a second otherwise, and most never read a cron expression."""
    from croniter import croniter as iterator  # type: ignore[import-untyped]  # no stubs published

    return iterator(expression, start)


def valid_cron(expression: str) -> bool:
    from croniter import croniter as iterator

    return bool(iterator.is_valid(expression))


class ScheduleError(ValueError):
    """A schedule declared wrong: the message names the schedule and what is wrong."""


@dataclass(frozen=True)
class Schedule:
    """A cron schedule of one workflow. Build it with `schedule(...)`; `setup` binds `workflow` to
    its registered name and `name` defaults to that name."""

    cron: str
    workflow: Any  # a workflow name, or the Workflow object until `setup` names it
    name: str = ""
    key: KeyFunction | None = None
    timezone: str = "UTC"
    catch_up: CatchUp = DEFAULT_CATCH_UP

    @property
    def label(self) -> str:
        return f"schedule {self.name!r}" if self.name else f"schedule {self.cron!r} of {self.workflow!r}"

    @property
    def tz(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.timezone)

    @property
    def missed_to_start(self) -> int:
        """How many missed fire times (before the latest due one) a late check starts too."""
        if self.catch_up == "skip":
            return 0
        if self.catch_up == "all":
            return MAX_CATCH_UP
        return int(self.catch_up)

    # --- fire times ---------------------------------------------------------------------------

    def next_after(self, when: dt.datetime) -> dt.datetime:
        """The first fire time strictly after `when` (UTC)."""
        nxt = croniter(self.cron, when.astimezone(self.tz)).get_next(dt.datetime)
        return nxt.astimezone(dt.UTC)

    def upcoming(self, after: dt.datetime, count: int) -> list[dt.datetime]:
        """The `count` fire times from `after` on (`after` itself included when it is one), UTC."""
        it = croniter(self.cron, (after - _TICK).astimezone(self.tz))
        return [it.get_next(dt.datetime).astimezone(dt.UTC) for _ in range(count)]

    def due(self, since: dt.datetime, now: dt.datetime) -> list[dt.datetime]:
        """The fire times in [since, now] to start now, oldest first: the latest one, plus up to
        `missed_to_start` earlier ones (the catch-up policy); older ones are skipped."""
        it = croniter(self.cron, (now + _TICK).astimezone(self.tz))
        fires: list[dt.datetime] = []
        while len(fires) <= self.missed_to_start:
            fire = it.get_prev(dt.datetime)
            if fire < since:
                break
            fires.append(fire.astimezone(dt.UTC))
        fires.reverse()
        return fires

    # --- runs ---------------------------------------------------------------------------------

    def run_key(self, fire_time: dt.datetime) -> list[str]:
        """The run key of a fire: `[name, fire time as ISO 8601 in the schedule's timezone]`, or
        what the declared key function returns."""
        local = fire_time.astimezone(self.tz)
        if self.key is None:
            return [self.name, local.isoformat()]
        return validate_key(self.key(local))

    def run_start(self, definition: Workflow, fire_time: dt.datetime) -> RunStart:
        local = fire_time.astimezone(self.tz)
        state = {
            **definition.initial_state(),
            SCHEDULE_STATE: {"name": self.name, "fire_time": local.isoformat()},
        }
        key = self.run_key(fire_time)
        return RunStart(
            workflow=self.workflow,
            key=key,
            version=definition.version,
            initial_state=state,
            fire_time=fire_time,
            concurrency_group=definition.group(self.workflow, key),
        )

    def declaration(self, now: dt.datetime) -> ScheduleDeclaration:
        return ScheduleDeclaration(
            name=self.name,
            workflow=self.workflow,
            cron=self.cron,
            timezone=self.timezone,
            catch_up=str(self.catch_up),
            first_fire_at=self.next_after(now),
        )

    def bound(self, workflow_name: str) -> Schedule:
        """This schedule under its registered workflow name; its key function checked once."""
        named = replace(self, workflow=workflow_name, name=self.name or workflow_name)
        if named.key is not None:
            sample = named.next_after(dt.datetime.now(dt.UTC))
            try:
                named.run_key(sample)
            except InvalidKey as exc:
                raise ScheduleError(f"{named.label}: its key function returned a bad key: {exc}") from None
            except Exception as exc:
                raise ScheduleError(
                    f"{named.label}: its key function failed for {sample.isoformat()}: {exc!r}"
                ) from None
        return named


def schedule(
    cron: str,
    workflow: Any,
    *,
    name: str | None = None,
    key: KeyFunction | None = None,
    timezone: str = "UTC",
    catch_up: CatchUp = DEFAULT_CATCH_UP,
) -> Schedule:
    """Start a run of `workflow` (its registered name, or the Workflow itself) at every fire time
    of the cron expression `cron` (5 fields, or 6 with seconds last), read in `timezone`. One run
    per fire time however many runners there are: its key is `[name, fire time]` (or `key(fire
    time)`), and it starts with `state["$schedule"] = {"name", "fire_time"}`. `name` defaults to
    the workflow's name (two schedules of one workflow need names). `catch_up` says what a check
    that comes late (runners were down) starts besides the latest due fire time: `"skip"` (the
    default) nothing more, `N` up to N missed fire times, `"all"` every one (at most 1000).
    Raises ScheduleError for a bad expression, timezone, policy, name or key function."""
    label = f"schedule {name!r}" if name else f"schedule {cron!r} of {workflow!r}"
    if name is not None and (not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME):
        raise ScheduleError(f"{label}: name must be a non-empty string of at most {MAX_NAME} characters")
    if name is not None and unstorable(name) is not None:
        raise ScheduleError(f"{label}: the name {unstorable(name)}")
    if not isinstance(cron, str) or len(cron) > MAX_NAME or not valid_cron(cron):
        raise ScheduleError(
            f"{label}: {cron!r} is not a valid cron expression (5 fields: minute hour day month"
            " weekday, e.g. '0 9 * * 1-5'; or 6 with seconds last)"
        )
    if not isinstance(timezone, str):
        raise ScheduleError(f"{label}: timezone must be an IANA name such as 'Europe/Paris'")
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ScheduleError(
            f"{label}: unknown timezone {timezone!r} (an IANA name such as 'Europe/Paris')"
        ) from None
    if catch_up not in ("skip", "all") and (
        isinstance(catch_up, bool) or not isinstance(catch_up, int) or not 0 <= catch_up <= MAX_CATCH_UP
    ):
        raise ScheduleError(
            f"{label}: catch_up must be 'skip', 'all' or a number of missed fires from 0 to"
            f" {MAX_CATCH_UP}, not {catch_up!r}"
        )
    if key is not None and not callable(key):
        raise ScheduleError(f"{label}: key must be a function of the fire time returning a run key")
    if not isinstance(workflow, str) and not hasattr(workflow, "run"):
        raise ScheduleError(f"{label}: workflow must be a workflow's name or the Workflow itself")
    return Schedule(
        cron=cron, workflow=workflow, name=name or "", key=key, timezone=timezone, catch_up=catch_up
    )
