"""An operator's side of a bulk action: preview it (a dry run), start it, abort it, read it.

Starting snapshots the runs the action applies to at that moment (BulkTarget rows, in the same
transaction as the operation), so the count the operator is told is the count it works through,
runs started later are not swept in, and a runner that takes the operation over knows exactly
which runs are left. A filter that matches no run the action applies to starts nothing: the
preview says 0 and starting raises NothingMatches (the API's 409 `nothing_matches`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from .. import conf
from ..core.exceptions import NotApplicable, NothingMatches, OperationNotFound
from ..core.records import Audit
from ..models import BulkOperation, BulkTarget, Run
from ..reads.run_filter import RunFilter
from .actions import BulkAction, action_named

SAMPLE_SIZE = 20  # runs a preview lists
SNAPSHOT_CHUNK = 2000  # target rows written per INSERT
SHOWN_SKIPS = 50  # skipped runs an operation's read lists (all are kept)


@dataclass(frozen=True)
class Preview:
    action: BulkAction
    filter: RunFilter
    count: int  # runs the action applies to now: what starting it would act on
    matched: int  # runs the filter matches, whatever their status
    sample: list[Run]  # up to SAMPLE_SIZE of the `count`, oldest first


def preview(action: str, filter: dict[str, Any] | RunFilter) -> Preview:
    """The dry run: how many runs the action would act on, and a sample. Changes nothing."""
    bulk, run_filter = action_named(action), _filter(filter)
    matched = run_filter.runs()
    runs = bulk.runs(matched)
    sample = list(runs.defer("state", "result").order_by("created_at", "id")[:SAMPLE_SIZE])
    return Preview(bulk, run_filter, count=runs.count(), matched=matched.count(), sample=sample)


def start(
    action: str,
    filter: dict[str, Any] | RunFilter,
    *,
    actor: str,
    reason: str = "",
    expected_count: int | None = None,
) -> BulkOperation:
    """Create the operation on the runs the action applies to now (pending: a runner, or the
    command that started it, executes it). `expected_count`, the count the operator confirmed,
    is kept beside the real one (`total`), which may differ if runs changed since the preview."""
    bulk, run_filter = action_named(action), _filter(filter)
    Audit(actor=actor, reason=reason)  # refuses text the database cannot store, before any write
    now = conf.default_store().shared_clock.now()
    with transaction.atomic():
        ids = list(bulk.runs(run_filter.runs()).order_by("id").values_list("id", flat=True))
        if not ids:
            raise NothingMatches(
                f"no run matches this filter that {bulk.label.lower()} applies to: nothing to do (0 runs)"
            )
        op = BulkOperation.objects.create(
            action=bulk.name, filter=run_filter.to_dict(), actor=actor, reason=reason,
            expected_count=expected_count, total=len(ids), created_at=now,
        )  # fmt: skip
        BulkTarget.objects.bulk_create(
            [BulkTarget(operation=op, run_id=i) for i in ids], batch_size=SNAPSHOT_CHUNK
        )
    return op


def abort(op_id: int | str, *, actor: str, reason: str = "") -> BulkOperation:
    """Stop an operation: a pending one at once, a running one after its current batch (what
    was done stays done). NotApplicable for one that has finished."""
    Audit(actor=actor, reason=reason)  # refuses text the database cannot store
    now = conf.default_store().shared_clock.now()
    with transaction.atomic():
        op = _locked(op_id)
        if op.finished:
            raise NotApplicable(
                f"bulk operation {op.id} has already finished ({op.status}): nothing to abort"
            )
        op.abort_requested, op.aborted_by, op.abort_reason = True, actor, reason
        if op.status == BulkOperation.Status.PENDING:
            op.status, op.finished_at = BulkOperation.Status.ABORTED, now
        op.save(update_fields=["abort_requested", "aborted_by", "abort_reason", "status", "finished_at"])
    return op


def get(op_id: int | str) -> BulkOperation:
    op = BulkOperation.objects.filter(id=_op_id(op_id)).first()
    if op is None:
        raise OperationNotFound(f"no bulk operation with id {op_id}")
    return op


def skipped_runs(op: BulkOperation, limit: int = SHOWN_SKIPS) -> list[BulkTarget]:
    """The runs the operation skipped or failed on, first reached first, each with why."""
    return list(op.targets.exclude(outcome__in=["", BulkTarget.Outcome.DONE]).order_by("id")[:limit])


def recent(limit: int = 5) -> list[BulkOperation]:
    """The latest operations (the dashboard's section), unfinished ones first."""
    unfinished = list(BulkOperation.objects.filter(status__in=["pending", "running"]).order_by("created_at"))
    rest = BulkOperation.objects.exclude(status__in=["pending", "running"]).order_by("-created_at", "-id")
    return unfinished + list(rest[: max(0, limit - len(unfinished))])


def _filter(filter: dict[str, Any] | RunFilter) -> RunFilter:
    return filter if isinstance(filter, RunFilter) else RunFilter.parse(filter)


def _op_id(op_id: int | str) -> int:
    try:
        return int(op_id)
    except (TypeError, ValueError):
        raise OperationNotFound(f"no bulk operation with id {op_id!r}") from None


def _locked(op_id: int | str) -> BulkOperation:
    op = BulkOperation.objects.select_for_update().filter(id=_op_id(op_id)).first()
    if op is None:
        raise OperationNotFound(f"no bulk operation with id {op_id}")
    return op
