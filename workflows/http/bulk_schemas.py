"""The schemas of the bulk routes (`workflows.http.bulk`): a filter and an action in, a preview
or an operation's progress out."""

from __future__ import annotations

import datetime as dt
import uuid
from typing import Any, Literal

from ninja import Field, Schema

from ..bulk.actions import ACTIONS
from ..bulk.control import skipped_runs
from ..models import BulkOperation
from .schemas import RunSummaryOut, _In

BulkActionName = Literal[tuple(ACTIONS)]  # type: ignore[valid-type]


class BulkFilterIn(_In):
    """At least one field; every field given must match."""

    workflow: str | None = None
    status: list[str] | str | None = Field(None, description="A status, or a list: any of them.")
    version: str | None = None
    error: str | None = Field(
        None, description="Contained in the run's last error (name or message), any case."
    )
    created_after: str | None = Field(None, description="ISO 8601; UTC when no offset is given.")
    created_before: str | None = None
    concurrency_group: str | None = None


class BulkPreviewIn(_In):
    action: BulkActionName  # type: ignore[valid-type]
    filter: BulkFilterIn


class BulkStartIn(BulkPreviewIn):
    reason: str = Field(min_length=1, description="Why: kept with the operation and in each run's audit log.")
    expected_count: int | None = Field(
        None,
        ge=0,
        description="The count the operator confirmed (from the preview), kept beside the real one.",
    )


class BulkAbortIn(_In):
    reason: str = Field("", description="Why: kept with the operation.")


class BulkPreviewOut(Schema):
    action: str
    filter: dict[str, Any]
    count: int = Field(description="Runs the action applies to now: what starting it would act on (0: none).")
    matched: int = Field(description="Runs the filter matches, whatever their status.")
    sample: list[RunSummaryOut] = Field(description="Up to 20 of them, oldest first.")


class BulkSkipOut(Schema):
    run_id: uuid.UUID
    outcome: str = Field(description="skipped (the action no longer applied) or failed.")
    reason: str


class BulkOperationOut(Schema):
    id: int
    action: str
    filter: dict[str, Any]
    actor: str
    reason: str
    status: str = Field(description="pending, running, done or aborted.")
    total: int = Field(description="Runs the action applied to when the operation was started.")
    expected_count: int | None
    done: int
    skipped: int
    failed: int
    abort_requested: bool
    aborted_by: str
    abort_reason: str
    created_at: dt.datetime
    started_at: dt.datetime | None
    finished_at: dt.datetime | None
    skipped_runs: list[BulkSkipOut] = Field(description="The first 50 runs skipped or failed on, with why.")

    @staticmethod
    def resolve_skipped_runs(op: BulkOperation) -> list[dict[str, Any]]:
        return [{"run_id": t.run_id, "outcome": t.outcome, "reason": t.reason} for t in skipped_runs(op)]
