"""How long finished runs are kept: the policy alone, no storage.

A finished run (completed, failed or cancelled) is deleted with its whole history once it has
been finished longer than its status's retention. A run an operator acted on (it has audit
entries) is also kept `audited_days` after its latest audit entry, whichever is later: the
audit log is kept for compliance with the run it describes (audit rows point at their run, so
they are deleted with it, never left dangling or kept without the run they explain).

`None` means "keep forever" everywhere: a status without a retention is never pruned, and with
`audited_days=None` a run with any audit entry is never pruned.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .records import RunStatus

PRUNABLE = (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)
AUDITED = "audited"
DEFAULT_AUDITED_DAYS = 365.0
MAX_DAYS = 100_000  # about 270 years: beyond it, dates overflow; use None to keep forever
KEYS = (*(s.value for s in PRUNABLE), AUDITED)


@dataclass(frozen=True)
class Retention:
    """Days finished runs are kept, by status (absent or None: forever), and days an operator's
    audit entry keeps its run past that."""

    days: Mapping[str, float | None] = field(default_factory=dict)
    audited_days: float | None = DEFAULT_AUDITED_DAYS

    @classmethod
    def from_setting(cls, raw: Mapping[str, Any] | None) -> Retention:
        """From `{"completed": 30, "cancelled": 30, "failed": 90, "audited": 365}` (days; any key
        optional). Raises ValueError naming a bad key or value (the system check reports it)."""
        raw = raw or {}
        if not isinstance(raw, Mapping):
            raise ValueError(f"must be a dict of days by status, not {raw!r}")
        unknown = sorted(str(k) for k in raw if k not in KEYS)
        if unknown:
            raise ValueError(f"has unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
        checked = {key: _days(key, raw[key]) for key in raw}
        audited = checked.pop(AUDITED) if AUDITED in checked else DEFAULT_AUDITED_DAYS
        return cls(days=checked, audited_days=audited)

    @property
    def enabled(self) -> bool:
        """Whether any status is pruned at all."""
        return any(self.days.get(status) is not None for status in PRUNABLE)

    def cutoff(self, status: str, now: dt.datetime) -> dt.datetime | None:
        """Runs of `status` finished before this are due (None: the status is kept forever)."""
        days = self.days.get(status)
        return None if days is None else now - dt.timedelta(days=days)

    def audit_cutoff(self, now: dt.datetime) -> dt.datetime | None:
        """A run with an audit entry after this is kept (None: any audit entry keeps it)."""
        return None if self.audited_days is None else now - dt.timedelta(days=self.audited_days)

    def kept_until(
        self, status: str, finished_at: dt.datetime | None, last_audit_at: dt.datetime | None = None
    ) -> dt.datetime | None:
        """When a run becomes due for pruning; None when it never will as things stand (a live
        run, a status kept forever, or an audited run while audit entries keep runs forever)."""
        days = self.days.get(status)
        if status not in PRUNABLE or finished_at is None or days is None:
            return None
        until = finished_at + dt.timedelta(days=days)
        if last_audit_at is not None:
            if self.audited_days is None:
                return None
            until = max(until, last_audit_at + dt.timedelta(days=self.audited_days))
        return until

    def describe(self, status: str, audited: bool = False) -> str:
        """The rule for a run of `status`, for people: "failed runs are kept 90 days"."""
        days = self.days.get(status)
        if status not in PRUNABLE:
            return "live runs are never pruned"
        rule = (
            f"{status} runs are kept {_plural(days)}"
            if days is not None
            else f"{status} runs are kept forever"
        )
        if audited and days is not None:
            if self.audited_days is None:
                return f"{rule}; runs with audit entries forever"
            return f"{rule}, and {_plural(self.audited_days)} after their last audit entry"
        return rule

    def describe_audited(self) -> str:
        """The audit rule, for people."""
        if self.audited_days is None:
            return "runs with audit entries are kept forever"
        return f"runs with audit entries are kept at least {_plural(self.audited_days)} after the last one"


def _days(key: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= MAX_DAYS:
        raise ValueError(f'"{key}" must be a number of days from 0 to {MAX_DAYS} or None, not {value!r}')
    return float(value)


def _plural(days: float) -> str:
    shown = f"{days:g}"
    return f"{shown} day" if shown == "1" else f"{shown} days"
