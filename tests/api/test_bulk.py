"""Bulk actions by filter (workflows.bulk): the preview, the operation's effect on each run (the
same as the single-run repair's), skipped runs, abort, audit, and an empty match."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.api import flows
from tests.api.helpers import assert_error, counts
from tests.api.test_operator import one_round, start
from workflows import operations
from workflows.bulk import control, executor
from workflows.core.exceptions import BadInput, NotApplicable, NothingMatches, OperationNotFound
from workflows.models import AuditEntry, BulkOperation, BulkTarget, Entry, Run
from workflows.testing import run_until_idle

WAITING = {"workflow": "approval", "status": "waiting"}


def waiting_runs(api, registry, n: int, prefix: str = "w") -> list[str]:
    ids = [start(api, workflow="approval", key=f"{prefix}{i}") for i in range(n)]
    run_until_idle(registry)
    assert set(Run.objects.filter(id__in=ids).values_list("status", flat=True)) == {"waiting"}
    return ids


def execute(op: BulkOperation, **kwargs) -> BulkOperation:
    claimed = executor.claim("test", op_id=op.id)
    assert claimed is not None
    return executor.execute(op.id, "test", **kwargs)


def run_row(run_id: str) -> dict:
    return Run.objects.filter(id=run_id).values(
        "status", "cancel_requested", "wake_at", "lease_owner", "epoch", "error", "result"
    )[0]


def test_preview__counts_the_runs_the_action_applies_to_and_lists_a_sample(api, registry):
    waiting = waiting_runs(api, registry, 3)
    flows.FAILURES.update(check=1)
    failed = start(api, key="f")
    run_until_idle(registry)

    cancel = control.preview("cancel", {"workflow": "approval"})
    replay = control.preview("replay", {"status": ["failed", "waiting"]})

    assert (cancel.count, cancel.matched) == (3, 3)
    assert sorted(str(r.id) for r in cancel.sample) == sorted(waiting)
    assert (replay.count, replay.matched) == (1, 4)  # only the failed run has a step to replay from
    assert [str(r.id) for r in replay.sample] == [failed]
    assert AuditEntry.objects.count() == 0 and BulkOperation.objects.count() == 0  # a dry run


def test_cancel__has_the_single_cancel_s_effect_on_each_run_and_audits_each(api, registry):
    alone, *bulk = waiting_runs(api, registry, 4)
    operations.cancel(alone, actor="ops:ada", reason="clean up")
    expected = {k: v for k, v in run_row(alone).items() if k != "wake_at"}

    op = control.start("cancel", WAITING, actor="ops:ada", reason="clean up", expected_count=3)
    assert (op.status, op.total, op.expected_count) == ("pending", 3, 3)
    op = execute(op, batch_size=2)

    assert (op.status, op.done, op.skipped, op.failed) == ("done", 3, 0, 0)
    for run_id in bulk:
        row = run_row(run_id)
        assert row.pop("wake_at") is not None  # woken to finish as cancelled, as a single cancel does
        assert row == expected
        [audit] = AuditEntry.objects.filter(run_id=run_id)
        assert (audit.action, audit.actor, audit.reason) == ("cancel", "ops:ada", "clean up")
        assert audit.details == {"bulk_operation": op.id}
    run_until_idle(registry)
    assert set(Run.objects.values_list("status", flat=True)) == {"cancelled"}


def test_cancel__skips_and_reports_runs_finished_since_the_start(api, registry):
    first, second = waiting_runs(api, registry, 2)
    op = control.start("cancel", WAITING, actor="ops:ada", reason="r")
    operations.cancel(first, actor="someone", reason="earlier")
    run_until_idle(registry)  # `first` is cancelled now

    op = execute(op)

    assert (op.done, op.skipped) == (1, 1)
    [skip] = control.skipped_runs(op)
    assert str(skip.run_id) == first and skip.outcome == "skipped"
    assert "already cancelled" in skip.reason
    assert AuditEntry.objects.filter(run_id=first).count() == 1  # only the single cancel's
    assert AuditEntry.objects.filter(run_id=second, details__bulk_operation=op.id).count() == 1


def test_replay__reruns_each_failed_run_from_its_failed_step(api, registry):
    flows.FAILURES.update(check=2)
    runs = [start(api, key=f"f{i}") for i in range(2)]
    run_until_idle(registry)
    failed_steps = {r: Entry.objects.get(run_id=r, name="check").id for r in runs}

    op = execute(
        control.start("replay", {"workflow": "flaky", "status": "failed"}, actor="ops", reason="fixed")
    )

    assert (op.done, op.skipped, op.failed) == (2, 0, 0)
    for run_id in runs:
        audit = AuditEntry.objects.get(run_id=run_id)
        assert audit.action == "replay" and audit.details["from_entry"] == failed_steps[run_id]
        assert audit.details["bulk_operation"] == op.id
        assert run_row(run_id)["status"] == "pending"
    run_until_idle(registry)
    assert set(Run.objects.filter(id__in=runs).values_list("status", flat=True)) == {"completed"}


def test_retry_now__makes_each_retry_due(api, registry):
    flows.FAILURES.update(fetch=2)
    runs = [start(api, key=f"r{i}") for i in range(2)]
    one_round(registry)
    assert set(Entry.objects.filter(run_id__in=runs, name="fetch").values_list("status", flat=True)) == {
        "retrying"
    }

    op = execute(control.start("retry_now", {"workflow": "flaky"}, actor="ops", reason="upstream is back"))

    assert (op.done, op.skipped) == (2, 0)
    assert AuditEntry.objects.filter(action="retry_now", details__bulk_operation=op.id).count() == 2
    one_round(registry)
    assert set(Run.objects.filter(id__in=runs).values_list("status", flat=True)) == {"completed"}


def test_abort__stops_after_the_current_batch(api, registry):
    waiting_runs(api, registry, 5)
    op = control.start("cancel", WAITING, actor="ops", reason="r")

    def abort_after_first_batch(progress: BulkOperation) -> None:
        if progress.processed == 2 and not progress.finished:
            control.abort(progress.id, actor="ops:bo")

    op = execute(op, batch_size=2, progress=abort_after_first_batch)

    assert (op.status, op.done, op.total) == ("aborted", 2, 5)
    assert op.aborted_by == "ops:bo"
    assert BulkTarget.objects.filter(operation=op, outcome="").count() == 3
    assert Run.objects.filter(cancel_requested=True).count() == 2
    with pytest.raises(NotApplicable, match="already finished"):
        control.abort(op.id, actor="ops")


def test_abort__of_a_pending_operation_ends_it_at_once(api, registry):
    waiting_runs(api, registry, 1)
    op = control.abort(control.start("cancel", WAITING, actor="ops").id, actor="ops")
    assert op.status == "aborted" and executor.claim("test") is None
    assert Run.objects.filter(cancel_requested=True).count() == 0


def test_a_dead_executor_s_operation_is_taken_over_after_its_lease(api, registry):
    waiting_runs(api, registry, 3)
    op = control.start("cancel", WAITING, actor="ops")
    assert executor.claim("dead", op_id=op.id) is not None
    assert executor.claim("other") is None  # leased
    BulkOperation.objects.filter(id=op.id).update(lease_expires_at=op.created_at)

    assert executor.claim("other") is not None
    assert executor.execute(op.id, "dead").done == 0  # the dead one's lease is gone: it does nothing
    assert executor.execute(op.id, "other").done == 3


def test_a_filter_matching_nothing_is_a_clear_zero(api, registry):
    waiting_runs(api, registry, 1)
    assert control.preview("cancel", {"workflow": "nope"}).count == 0
    assert control.preview("replay", WAITING).count == 0  # matches, but replay does not apply
    with pytest.raises(NothingMatches, match=r"\(0 runs\)"):
        control.start("cancel", {"workflow": "nope"}, actor="ops")
    assert BulkOperation.objects.count() == 0


@pytest.mark.parametrize(
    "action, filter, message",
    [("explode", WAITING, "unknown bulk action"), ("cancel", {}, "at least one filter field"),
     ("cancel", {"colour": "red"}, "unknown filter field"), ("cancel", {"status": "asleep"}, "unknown status"),
     ("cancel", {"created_after": "yesterday"}, "not an ISO 8601 time"),
     ("cancel", {"created_after": "2026-01-02", "created_before": "2026-01-01"}, "must be before")],
)  # fmt: skip
def test_bad_input_is_refused_and_changes_nothing(api, registry, action, filter, message):
    waiting_runs(api, registry, 1)
    with pytest.raises(BadInput, match=message):
        control.preview(action, filter)
    with pytest.raises(BadInput, match=message):
        control.start(action, filter, actor="ops")
    assert BulkOperation.objects.count() == 0


def test_filters_by_error_text_version_and_time(api, registry):
    flows.FAILURES.update(check=1)
    failed = start(api, key="f")
    run_until_idle(registry)
    waiting_runs(api, registry, 1)
    created = Run.objects.get(id=failed).created_at

    assert control.preview("replay", {"error": "BAD DATA"}).count == 1
    assert control.preview("replay", {"error": "other text"}).count == 0
    assert control.preview("cancel", {"version": "v1"}).count == 1
    assert control.preview("cancel", {"version": "v2"}).count == 0
    assert control.preview("replay", {"created_after": created.isoformat()}).count == 1
    assert control.preview("replay", {"created_before": created.isoformat()}).count == 0


def test_an_unknown_operation_is_not_found(db):
    with pytest.raises(OperationNotFound):
        control.get(12345)
    with pytest.raises(OperationNotFound):
        control.abort("abc", actor="ops")


# --- over the API ---------------------------------------------------------------------------------


def test_api__preview_start_follow_and_abort(api, registry):
    ids = waiting_runs(api, registry, 3)
    body = {"action": "cancel", "filter": {"workflow": "approval", "status": ["waiting"]}}

    preview = api.post("/api/bulk/preview", body)
    assert preview.status_code == 200, preview.content
    assert (preview.json()["count"], preview.json()["matched"]) == (3, 3)
    assert sorted(r["id"] for r in preview.json()["sample"]) == sorted(ids)

    started = api.post("/api/bulk", {**body, "reason": "clean up", "expected_count": 3})
    assert started.status_code == 202, started.content
    op = started.json()
    assert (op["status"], op["total"], op["actor"], op["expected_count"]) == ("pending", 3, "api:tester", 3)

    executor.execute(executor.claim("test").id, "test")
    progress = api.get(f"/api/bulk/{op['id']}").json()
    assert (progress["status"], progress["done"], progress["skipped"], progress["skipped_runs"]) == (
        "done",
        3,
        0,
        [],
    )
    assert AuditEntry.objects.filter(actor="api:tester", details__bulk_operation=op["id"]).count() == 3

    assert_error(api.post(f"/api/bulk/{op['id']}/abort", {"reason": "stop"}), 409, "not_applicable")


def test_api__a_filter_matching_nothing_is_zero_then_409(api, registry):
    body = {"action": "cancel", "filter": {"workflow": "nope"}}
    preview = api.post("/api/bulk/preview", body)
    assert preview.status_code == 200 and preview.json()["count"] == 0 and preview.json()["sample"] == []

    error = assert_error(api.post("/api/bulk", {**body, "reason": "r"}), 409, "nothing_matches")
    assert "0 runs" in error["message"]
    assert BulkOperation.objects.count() == 0


def test_api__skipped_runs_are_listed_with_why(api, registry):
    first, _ = waiting_runs(api, registry, 2)
    op = api.post("/api/bulk", {"action": "cancel", "filter": WAITING, "reason": "r"}).json()
    operations.cancel(first, actor="someone")
    run_until_idle(registry)  # `first` ends cancelled
    executor.execute(executor.claim("test").id, "test")

    [skip] = api.get(f"/api/bulk/{op['id']}").json()["skipped_runs"]
    assert (skip["run_id"], skip["outcome"]) == (first, "skipped")
    assert skip["reason"] == "Cancel does not apply to a cancelled run: it is already cancelled."


@pytest.mark.parametrize(
    "body",
    [{"action": "explode", "filter": WAITING}, {"action": "cancel", "filter": {}},
     {"action": "cancel", "filter": {"colour": "red"}}, {"action": "cancel", "filter": {"status": "asleep"}},
     {"action": "cancel", "filter": {"created_after": "nope"}}, {"action": "cancel"}],
    ids=["unknown-action", "empty-filter", "unknown-field", "bad-status", "bad-time", "no-filter"],
)  # fmt: skip
def test_api__bad_input_is_422_and_changes_nothing(api, registry, body):
    waiting_runs(api, registry, 1)
    before = counts()
    assert_error(api.post("/api/bulk/preview", body), 422, "invalid_request")
    assert_error(api.post("/api/bulk", {**body, "reason": "r"}), 422, "invalid_request")
    assert counts() == before and BulkOperation.objects.count() == 0


def test_api__an_unknown_operation_is_404(api):
    assert_error(api.get("/api/bulk/999"), 404, "not_found")
    assert_error(api.get("/api/bulk/abc"), 404, "not_found")
    assert_error(api.post("/api/bulk/999/abort", {}), 404, "not_found")


def test_api__a_repair_that_does_not_apply_is_409_with_the_reason(api, registry):
    [run_id] = waiting_runs(api, registry, 1)
    operations.cancel(run_id, actor="ops")
    run_until_idle(registry)
    error = assert_error(api.post(f"/api/runs/{run_id}/cancel", {"reason": "again"}), 409, "not_applicable")
    assert "already cancelled" in error["message"]


# --- from the command line ------------------------------------------------------------------------


def cmd(*args: str) -> str:
    out = io.StringIO()
    call_command("workflows", *args, stdout=out)
    return out.getvalue()


def test_cli__dry_run_prints_the_count_and_a_sample_and_changes_nothing(api, registry):
    ids = waiting_runs(api, registry, 2)
    out = cmd("bulk", "cancel", "--workflow", "approval", "--status", "waiting", "--dry-run")
    assert "Cancel: 2 run(s) of 2 matching" in out and all(i in out for i in ids)
    assert BulkOperation.objects.count() == 0 and AuditEntry.objects.count() == 0


def test_cli__executes_with_progress_then_status_and_abort(api, registry):
    waiting_runs(api, registry, 3)
    out = cmd("bulk", "cancel", "--workflow", "approval", "--reason", "clean up", "--yes")
    op = BulkOperation.objects.get()
    assert "3/3: 3 done, 0 skipped, 0 failed" in out and op.status == "done"
    assert AuditEntry.objects.filter(actor__startswith="cli:", details__bulk_operation=op.id).count() == 3
    assert f"bulk operation {op.id}: cancel" in cmd("bulk-status", str(op.id))
    with pytest.raises(CommandError, match="already finished"):
        cmd("bulk-abort", str(op.id))


def test_cli__not_confirmed_changes_nothing_and_nothing_matching_says_so(api, registry, monkeypatch):
    waiting_runs(api, registry, 1)
    monkeypatch.setattr("builtins.input", lambda question: "no")
    with pytest.raises(CommandError, match="not confirmed"):
        cmd("bulk", "cancel", "--workflow", "approval", "--reason", "r")
    assert "Nothing to do" in cmd("bulk", "cancel", "--workflow", "nope", "--reason", "r")
    with pytest.raises(CommandError, match="at least one filter field"):
        cmd("bulk", "cancel", "--reason", "r")
    assert BulkOperation.objects.count() == 0 and AuditEntry.objects.count() == 0


def test_cli__background_leaves_it_to_a_runner(api, registry):
    waiting_runs(api, registry, 2)
    out = cmd("bulk", "cancel", "--workflow", "approval", "--reason", "r", "--yes", "--background")
    assert "the runners execute it" in out and BulkOperation.objects.get().status == "pending"
    assert executor.execute_pending() == 1
    assert BulkOperation.objects.get().status == "done"


def test_runners_execute_bulk_operations_every_bulk_seconds(settings):
    from workflows.management.commands.runworkflows import _periodic

    settings.WORKFLOWS = {**settings.WORKFLOWS, "RETENTION": {}, "DOCTOR_SECONDS": None, "BULK_SECONDS": 3}
    assert _periodic() == [(3.0, executor.execute_pending_in_own_thread)]
    settings.WORKFLOWS = {**settings.WORKFLOWS, "BULK_SECONDS": None}
    assert _periodic() == []
