"""The bulk actions, one entry each: its name, the run statuses it applies to (what a preview
counts), and what it does to a batch of runs. Each reuses the single-run repair it is a bulk
form of, so one run changes the same way whether an operator acted on it alone or by filter.

A batch function gets the batch's run ids and the Audit (actor, reason, the operation's id) and
returns `Outcomes`: the runs it skipped because the action no longer applies to them (each with
the sentence that says why) and those it failed on (with the error). Every other run was done.
`one_by_one` turns a single-run function into a batch function (each run in its own savepoint).

Pause and resume call the single-run `operations.pause_run` / `resume_run` run by run.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Exists, OuterRef, QuerySet

from .. import conf
from ..core.exceptions import BadInput, NotApplicable, RunNotFound
from ..core.records import Audit, EntryStatus, RunStatus
from ..models import Entry, Run

logger = logging.getLogger(__name__)


@dataclass
class Outcomes:
    skipped: dict[str, str] = field(default_factory=dict)  # run id -> why the action no longer applies
    failed: dict[str, str] = field(default_factory=dict)  # run id -> the error


BatchFunction = Callable[[list[str], Audit], Outcomes]
RunFunction = Callable[[str, Audit], object]  # raises NotApplicable (or RunNotFound) to skip


@dataclass(frozen=True)
class BulkAction:
    name: str
    label: str  # for people: "Cancel", "Replay from the failed step"
    statuses: tuple[str, ...]  # the run statuses it applies to
    apply: BatchFunction
    # Narrows the runs of those statuses to those it applies to (e.g. has a failed step).
    narrow: Callable[[QuerySet[Run]], QuerySet[Run]] | None = None

    def runs(self, matched: QuerySet[Run]) -> QuerySet[Run]:
        """Of the runs a filter matched, those this action applies to now."""
        runs = matched.filter(status__in=self.statuses)
        return self.narrow(runs) if self.narrow else runs


def one_by_one(apply_to_run: RunFunction) -> BatchFunction:
    """A batch function that calls `apply_to_run` on each run in its own savepoint: a run it no
    longer applies to (NotApplicable, RunNotFound, BadInput) is skipped with the sentence why;
    any other error is logged and the run counted as failed; the batch goes on either way."""

    def apply(run_ids: list[str], audit: Audit) -> Outcomes:
        outcomes = Outcomes()
        for run_id in run_ids:
            try:
                with transaction.atomic():
                    apply_to_run(run_id, audit)
            except (NotApplicable, RunNotFound, BadInput) as exc:
                outcomes.skipped[run_id] = str(exc)
            except Exception as exc:
                logger.exception("bulk operation %s: run %s failed", audit.bulk_operation, run_id)
                outcomes.failed[run_id] = f"{type(exc).__name__}: {exc}"
        return outcomes

    return apply


# --- cancel: set-based, the store's `cancel_batch` ----------------------------------------------


def _cancel(run_ids: list[str], audit: Audit) -> Outcomes:
    store = conf.default_store()
    return Outcomes(skipped=store.cancel_batch(run_ids, audit=audit, now=store.shared_clock.now()))


# --- replay from the failed step ----------------------------------------------------------------


def _has_current(status: str) -> Exists:
    return Exists(Entry.objects.filter(run=OuterRef("pk"), superseded=False, status=status))


def _replay_failed_step(run_id: str, audit: Audit) -> None:
    from .. import operations

    status = Run.objects.filter(id=run_id).values_list("status", flat=True).first()
    if status is None:
        raise RunNotFound(f"run {run_id} no longer exists")
    if status != RunStatus.FAILED:
        raise NotApplicable(f"Replay from the failed step applies to a failed run; this one is {status} now.")
    entry = _current(run_id, EntryStatus.FAILED)
    if entry is None:
        raise NotApplicable("Replay from the failed step does not apply: the run has no failed step.")
    operations.replay_from(
        run_id, entry.id, actor=audit.actor, reason=audit.reason, bulk_operation=audit.bulk_operation
    )


def _current(run_id: str, status: str) -> Entry | None:
    """The run's latest current entry in `status` (the failed step, the step waiting to retry)."""
    return Entry.objects.filter(run_id=run_id, superseded=False, status=status).order_by("-id").first()


# --- retry now ----------------------------------------------------------------------------------


def _retry_now(run_id: str, audit: Audit) -> None:
    from .. import operations

    entry = _current(run_id, EntryStatus.RETRYING)
    if entry is None:
        raise NotApplicable("Retry now does not apply: none of the run's steps waits to retry now.")
    operations.retry_now(
        run_id, entry.id, actor=audit.actor, reason=audit.reason, bulk_operation=audit.bulk_operation
    )


# --- pause and resume ---------------------------------------------------------------------------


def _pause(run_id: str, audit: Audit) -> None:
    from .. import operations

    operations.pause_run(run_id, actor=audit.actor, reason=audit.reason, bulk_operation=audit.bulk_operation)


def _resume(run_id: str, audit: Audit) -> None:
    from .. import operations

    operations.resume_run(run_id, actor=audit.actor, reason=audit.reason, bulk_operation=audit.bulk_operation)


LIVE = (RunStatus.PENDING, RunStatus.WAITING, RunStatus.RUNNING)

ACTIONS: dict[str, BulkAction] = {
    a.name: a
    for a in (
        # A run already asked to cancel (finishing as cancelled now) is not counted again.
        BulkAction(
            "cancel", "Cancel", LIVE, _cancel, narrow=lambda runs: runs.filter(cancel_requested=False)
        ),
        BulkAction(
            "replay",
            "Replay from the failed step",
            (RunStatus.FAILED,),
            one_by_one(_replay_failed_step),
            narrow=lambda runs: runs.filter(_has_current(EntryStatus.FAILED)),
        ),
        BulkAction(
            "retry_now",
            "Retry now",
            LIVE,
            one_by_one(_retry_now),
            narrow=lambda runs: runs.filter(_has_current(EntryStatus.RETRYING)),
        ),
        BulkAction(
            "pause", "Pause", LIVE, one_by_one(_pause), narrow=lambda runs: runs.filter(pause_requested=False)
        ),
        BulkAction("resume", "Resume", (RunStatus.PAUSED,), one_by_one(_resume)),
    )
}


def action_named(name: str) -> BulkAction:
    action = ACTIONS.get(name)
    if action is None:
        raise BadInput(f"unknown bulk action {name!r}; one of {', '.join(ACTIONS)}")
    return action
