"""A bulk operation paced to the runners' claims (workflows.bulk.pacing): before its next batch it
waits until a live runner has taken up most of the runs its last batch made due; with no runner
alive it does not wait; with runners that take up none it stops pacing after BULK_PACE_SECONDS.

The "runner" here is the executor's own `should_stop` hook, which the pacing calls on each poll:
each call takes up (claims) one due run of the operation, as a slow runner would."""

from __future__ import annotations

import logging

import pytest

from tests.api.test_bulk import WAITING, execute, waiting_runs
from workflows import conf
from workflows.bulk import control
from workflows.models import BulkTarget, Run, RunnerPresence


@pytest.fixture
def runner_alive(db):
    now = conf.default_store().shared_clock.now()
    RunnerPresence.objects.create(
        owner="runner:test",
        host="here",
        pid=1,
        started_at=now,
        last_seen=now,
        lease_seconds=60,
        concurrency=4,
    )


@pytest.fixture
def patience(settings):
    def set_to(seconds: float) -> None:
        settings.WORKFLOWS = {**settings.WORKFLOWS, "BULK_PACE_SECONDS": seconds}

    return set_to


def claim_one(run_ids: list[str]) -> bool:
    """A slow runner: takes up one run of `run_ids` the cancel woke, per call."""
    run = Run.objects.filter(id__in=run_ids, status="waiting", cancel_requested=True).order_by("id").first()
    if run is not None:
        Run.objects.filter(id=run.id).update(status="running")
    return False  # never asks the executor to stop


def still_due(run_ids: list[str]) -> int:
    return Run.objects.filter(id__in=run_ids, status="waiting").count()


def batches_due_at_each_batch(op, run_ids: list[str]) -> list[int]:
    """Executes `op` in batches of 4; after each batch, how many runs of the batches before it
    were still due (not taken up by the runner)."""
    seen: list[int] = []
    done_before: list[str] = []

    def progress(op) -> None:
        seen.append(still_due(done_before))
        done_before[:] = [
            str(i)
            for i in BulkTarget.objects.filter(operation=op, outcome="done").values_list("run_id", flat=True)
        ]

    execute(op, batch_size=4, progress=progress, should_stop=lambda: claim_one(run_ids))
    return seen


def test_waits_for_the_runners_to_take_up_the_last_batch_before_the_next(
    api, registry, runner_alive, patience
):
    patience(30)
    run_ids = waiting_runs(api, registry, 12)
    op = control.start("cancel", WAITING, actor="ops", reason="called off", expected_count=12)

    seen = batches_due_at_each_batch(op, run_ids)

    op.refresh_from_db()
    assert (op.status, op.done) == ("done", 12)
    # Batch 1 had nothing before it; before batches 2 and 3 the runner had taken up all but a
    # quarter (1 of 4) of the batch before. Unpaced, 3 of each batch would still be due (one
    # claim per batch, from the executor's own call before each batch).
    assert seen[0] == 0 and all(due <= 1 for due in seen[1:3]), seen


def test_does_not_wait_when_no_runner_is_alive(api, registry, patience):
    patience(30)
    run_ids = waiting_runs(api, registry, 8, prefix="n")
    op = control.start("cancel", WAITING, actor="ops", reason="called off", expected_count=8)

    seen = batches_due_at_each_batch(op, run_ids)

    op.refresh_from_db()
    assert (op.status, op.done) == ("done", 8)
    assert seen[1] == 3  # the runs of batch 1 still due when batch 2 ran: it did not wait


def test_stops_pacing_when_the_runners_take_up_none(api, registry, runner_alive, patience, caplog):
    patience(0.3)
    waiting_runs(api, registry, 12, prefix="s")
    op = control.start("cancel", WAITING, actor="ops", reason="called off", expected_count=12)

    with caplog.at_level(logging.WARNING, logger="workflows.bulk.pacing"):
        op = execute(op, batch_size=4)  # no runner claims anything

    assert (op.status, op.done) == ("done", 12)
    gave_up = [r for r in caplog.records if "goes on without pacing" in r.getMessage()]
    assert len(gave_up) == 1  # once: the rest of the operation went unpaced
