"""Executing a bulk operation: claimed under a lease by one process (a runner's housekeeping
every WORKFLOWS["BULK_SECONDS"], or the command that started it), then worked through in
batches of WORKFLOWS["BULK_BATCH"] runs.

Each batch is one transaction: the operation's row locked (so an abort waits for the batch,
never interleaves with it), the action applied to the batch's runs, their outcomes and the
operation's counts written, the lease renewed. A batch is thus done exactly once: a process
that dies mid-batch leaves nothing of it, and the runner that takes the operation over when its
lease expires starts that batch again. An abort is seen at the start of the next batch.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import socket
import threading
from collections import defaultdict
from collections.abc import Callable

from django.db import connections, transaction
from django.db.models import Q
from django.db.models.functions import Coalesce

from .. import conf
from ..core.records import Audit
from ..models import BulkOperation, BulkTarget
from ..storage.django.reconnect import reconnecting
from .actions import BulkAction, Outcomes, action_named
from .pacing import Pacer

logger = logging.getLogger(__name__)

LEASE_SECONDS = 60.0  # a batch takes far less; a dead executor's operation is taken over after this
Status = BulkOperation.Status


def _now() -> dt.datetime:
    return conf.default_store().shared_clock.now()


def _claimable(now: dt.datetime) -> Q:
    return Q(status=Status.PENDING) | Q(status=Status.RUNNING, lease_expires_at__lt=now)


def claim(owner: str, *, op_id: int | None = None) -> BulkOperation | None:
    """Take a pending operation (the oldest, or `op_id`), or a running one whose executor's
    lease expired, for `owner`; None when there is none. A conditional UPDATE: of two processes
    claiming at once, one wins, on any database."""
    now = _now()
    candidates = BulkOperation.objects.filter(_claimable(now)).order_by("created_at", "id")
    if op_id is not None:
        candidates = candidates.filter(id=op_id)
    for candidate in candidates.values_list("id", flat=True)[:10]:
        won = BulkOperation.objects.filter(_claimable(now), id=candidate).update(
            status=Status.RUNNING,
            lease_owner=owner,
            started_at=Coalesce("started_at", now),
            lease_expires_at=now + dt.timedelta(seconds=LEASE_SECONDS),
        )
        if won:
            return BulkOperation.objects.get(id=candidate)
    return None


def execute(
    op_id: int,
    owner: str,
    *,
    batch_size: int | None = None,
    progress: Callable[[BulkOperation], object] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> BulkOperation:
    """Work through a claimed operation, batch by batch, until it is done, aborted, taken over
    or `should_stop()` (the lease is then given up, so another process takes it at once).
    `progress(op)` is called after each batch."""
    op = BulkOperation.objects.get(id=op_id)
    bulk = action_named(op.action)
    size = batch_size or conf.bulk_batch()
    pacer = Pacer(op_id, owner, LEASE_SECONDS, patience=conf.bulk_pace_seconds())
    while True:
        if should_stop is not None and should_stop():
            BulkOperation.objects.filter(id=op_id, lease_owner=owner, status=Status.RUNNING).update(
                lease_expires_at=_now()
            )
            return BulkOperation.objects.get(id=op_id)
        op, acted_on = _one_batch(op_id, owner, bulk, size)
        if progress is not None:
            progress(op)
        if acted_on is None:
            return op
        pacer.after_batch(acted_on, should_stop)


def _one_batch(op_id: int, owner: str, bulk: BulkAction, size: int) -> tuple[BulkOperation, list[str] | None]:
    """One batch, in one transaction: the operation and the runs the batch acted on, or None
    when the operation has no batch left (done, aborted, taken over)."""
    now = _now()
    with transaction.atomic():
        op = BulkOperation.objects.select_for_update().get(id=op_id)
        if op.lease_owner != owner or op.finished:  # taken over, or ended meanwhile
            return op, None
        if op.abort_requested:
            return _finish(op, Status.ABORTED, now), None
        targets = list(op.targets.filter(outcome="").order_by("id")[:size])
        if not targets:
            return _finish(op, Status.DONE, now), None
        ids = [str(t.run_id) for t in targets]
        outcomes = bulk.apply(ids, Audit(actor=op.actor, reason=op.reason, bulk_operation=op.id))
        _record(op, targets, outcomes)
        op.lease_expires_at = now + dt.timedelta(seconds=LEASE_SECONDS)
        op.save(update_fields=["done", "skipped", "failed", "lease_expires_at"])
    return op, [i for i in ids if i not in outcomes.skipped and i not in outcomes.failed]


def _record(op: BulkOperation, targets: list[BulkTarget], outcomes: Outcomes) -> None:
    """The batch's outcomes: one UPDATE for the runs done, one per distinct reason otherwise."""
    by_reason: dict[tuple[str, str], list[int]] = defaultdict(list)
    done = []
    for target in targets:
        run_id = str(target.run_id)
        if run_id in outcomes.skipped:
            by_reason[(BulkTarget.Outcome.SKIPPED, outcomes.skipped[run_id])].append(target.id)
        elif run_id in outcomes.failed:
            by_reason[(BulkTarget.Outcome.FAILED, outcomes.failed[run_id])].append(target.id)
        else:
            done.append(target.id)
    BulkTarget.objects.filter(id__in=done).update(outcome=BulkTarget.Outcome.DONE)
    for (outcome, reason), ids in by_reason.items():
        BulkTarget.objects.filter(id__in=ids).update(outcome=outcome, reason=reason)
    op.done += len(done)
    op.skipped += len(outcomes.skipped)
    op.failed += len(outcomes.failed)


def _finish(op: BulkOperation, status: str, now: dt.datetime) -> BulkOperation:
    op.status, op.finished_at, op.lease_owner, op.lease_expires_at = status, now, "", None
    op.save(update_fields=["status", "finished_at", "lease_owner", "lease_expires_at"])
    logger.info(
        "bulk operation %s (%s) %s: %s done, %s skipped, %s failed of %s",
        op.id, op.action, status, op.done, op.skipped, op.failed, op.total,
    )  # fmt: skip
    return op


def executor_id(kind: str) -> str:
    return f"{kind}:{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}"


def execute_pending(*, should_stop: Callable[[], bool] | None = None) -> int:
    """Claim and execute operations until none is left; how many were executed."""
    owner, executed = executor_id("runner"), 0
    while not (should_stop and should_stop()):
        op = claim(owner)
        if op is None:
            break
        execute(op.id, owner, should_stop=should_stop)
        executed += 1
    return executed


async def execute_pending_in_own_thread() -> int:
    """For the runner's housekeeping (WORKFLOWS["BULK_SECONDS"]): in a worker thread with its
    own connection, closed after, never in the runner's database threads. A stopping runner
    lets the current batch finish and gives the operation's lease up."""
    stop = threading.Event()

    @reconnecting  # the database out of reach: StoreUnavailable, logged in one line
    def work() -> int:
        try:
            return execute_pending(should_stop=stop.is_set)
        finally:
            connections.close_all()  # this thread's connections only

    try:
        return await asyncio.to_thread(work)
    except asyncio.CancelledError:
        stop.set()
        raise
