"""Which runs a bulk action is about: a filter an operator gives by workflow, status, version,
error text, creation time and concurrency group, checked before anything reads or changes runs.

The API takes it as a JSON object, the command as options, the dashboard as a form; all three
build one `RunFilter` with `RunFilter.parse`, which refuses an unknown field, a status that is
not one, a malformed time or an empty filter (a bulk action on every run is never what a typo
meant) with a BadInput that says which. `to_dict` is what an operation stores and shows.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from typing import Any

from django.db.models import Q, QuerySet

from ..core.exceptions import BadInput
from ..core.records import RunStatus
from ..models import Run
from .runs import _aware

MAX_TEXT = 500  # the longest name or error text a filter takes
STATUSES = tuple(s.value for s in RunStatus)


@dataclass(frozen=True)
class RunFilter:
    workflow: str = ""
    status: tuple[str, ...] = ()  # any of these
    version: str = ""
    error: str = ""  # contained in the run's last error (its name or message), any case
    created_after: dt.datetime | None = None
    created_before: dt.datetime | None = None
    concurrency_group: str = ""

    @classmethod
    def parse(cls, data: dict[str, Any] | None) -> RunFilter:
        """A filter from what a caller gave (None or empty values are left out); BadInput when
        a field is unknown or malformed, or when nothing is given at all."""
        if not isinstance(data, dict):
            raise BadInput("the filter must be an object of fields")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise BadInput(f"unknown filter field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        given = {k: v for k, v in data.items() if v not in (None, "", [], ())}
        if not given:
            raise BadInput(
                "give at least one filter field: a bulk action never applies to every run by default"
            )
        values: dict[str, Any] = {}
        for name in ("workflow", "version", "error", "concurrency_group"):
            if name in given:
                values[name] = _text(name, given[name])
        if "status" in given:
            values["status"] = _statuses(given["status"])
        for name in ("created_after", "created_before"):
            if name in given:
                values[name] = _time(name, given[name])
        after, before = values.get("created_after"), values.get("created_before")
        if after and before and after >= before:
            raise BadInput("created_after must be before created_before")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The fields given, as JSON (what an operation stores and the pages show)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value in ("", (), None):
                continue
            out[f.name] = (
                value.isoformat()
                if isinstance(value, dt.datetime)
                else list(value)
                if isinstance(value, tuple)
                else value
            )
        return out

    def runs(self, using: str | None = None) -> QuerySet[Run]:
        """The runs it matches (every status it names, or any)."""
        runs = Run.objects.using(using).all()
        if self.workflow:
            runs = runs.filter(workflow=self.workflow)
        if self.status:
            runs = runs.filter(status__in=self.status)
        if self.version:
            runs = runs.filter(version=self.version)
        if self.error:
            runs = runs.filter(Q(error__message__icontains=self.error) | Q(error__name__icontains=self.error))
        if self.created_after:
            runs = runs.filter(created_at__gte=self.created_after)
        if self.created_before:
            runs = runs.filter(created_at__lt=self.created_before)
        if self.concurrency_group:
            runs = runs.filter(concurrency_group=self.concurrency_group)
        return runs


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT or "\x00" in value:
        raise BadInput(f"filter field {name} must be text of at most {MAX_TEXT} characters")
    return value


def _statuses(value: Any) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, list | tuple) or not all(isinstance(s, str) for s in items):
        raise BadInput("filter field status must be a status or a list of them")
    wrong = [s for s in items if s not in STATUSES]
    if wrong:
        raise BadInput(f"unknown status {', '.join(map(repr, wrong))}; one of {', '.join(STATUSES)}")
    return tuple(dict.fromkeys(items))


def _time(name: str, value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        return _aware(value)
    if not isinstance(value, str):
        raise BadInput(f"filter field {name} must be an ISO 8601 time")
    try:
        return _aware(dt.datetime.fromisoformat(value))
    except ValueError:
        raise BadInput(f"filter field {name} is not an ISO 8601 time: {value!r}") from None
