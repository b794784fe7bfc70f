"""Pause and resume over the API (`POST /api/runs/{id}/pause|resume`, `POST
/api/workflows/{name}/pause|resume`, `GET /api/paused-workflows`) and the command line
(`manage.py workflows pause|resume|paused`): what applies changes the run and is audited; what
does not apply is 409 with the reason and changes nothing; a missing run is 404."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from tests.api.helpers import assert_error, counts
from tests.api.test_operator import start
from workflows.models import AuditEntry, Run, WorkflowPause
from workflows.testing import run_until_idle

MISSING = "0190d9c4-0000-7000-8000-000000000000"


@pytest.fixture
def waiting_run(api, registry) -> str:
    run_id = start(api, workflow="approval", key="a")
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "waiting"
    return run_id


def test_pause_then_resume_a_waiting_run(api, registry, waiting_run):
    response = api.post(f"/api/runs/{waiting_run}/pause", {"reason": "look first"})

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "paused"
    audit = AuditEntry.objects.get(run_id=waiting_run)
    assert (audit.action, audit.actor, audit.reason) == ("pause", "api:tester", "look first")

    response = api.post(f"/api/runs/{waiting_run}/resume", {"reason": "looked"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "waiting"
    assert AuditEntry.objects.filter(run_id=waiting_run, action="resume").count() == 1


def test_pause_and_resume_that_do_not_apply_are_409_with_the_reason_and_change_nothing(api, waiting_run):
    before = counts()
    error = assert_error(api.post(f"/api/runs/{waiting_run}/resume", {"reason": "x"}), 409, "not_applicable")
    assert "paused" in error["message"]
    assert counts() == before

    api.post(f"/api/runs/{waiting_run}/pause", {"reason": "once"})
    before = counts()
    assert_error(api.post(f"/api/runs/{waiting_run}/pause", {"reason": "twice"}), 409, "not_applicable")
    assert counts() == before
    assert Run.objects.get(id=waiting_run).status == "paused"


def test_pause_of_a_finished_run_is_409(api, registry):
    run_id = start(api, key="done")
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "completed"
    before = counts()
    assert_error(api.post(f"/api/runs/{run_id}/pause", {"reason": "late"}), 409, "not_applicable")
    assert counts() == before


@pytest.mark.parametrize("verb", ["pause", "resume"])
def test_a_missing_or_malformed_run_is_404_and_a_missing_reason_422(api, waiting_run, verb):
    before = counts()
    assert_error(api.post(f"/api/runs/{MISSING}/{verb}", {"reason": "x"}), 404, "not_found")
    assert_error(api.post(f"/api/runs/not-a-uuid/{verb}", {"reason": "x"}), 404, "not_found")
    assert_error(api.post(f"/api/runs/{waiting_run}/{verb}", {}), 422, "invalid_request")
    assert counts() == before


def test_pause_a_workflow_lists_it_and_holds_its_runs_until_resumed(api, registry):
    response = api.post("/api/workflows/approval/pause", {"reason": "partner down"})
    assert response.status_code == 200, response.content
    assert (response.json()["workflow"], response.json()["actor"]) == ("approval", "api:tester")

    run_id = start(api, workflow="approval", key="held")
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "pending"  # not claimed while its workflow is paused

    listed = api.get("/api/paused-workflows")
    assert listed.status_code == 200
    assert [(w["workflow"], w["reason"]) for w in listed.json()] == [("approval", "partner down")]

    assert_error(api.post("/api/workflows/approval/pause", {"reason": "again"}), 409, "not_applicable")
    assert api.post("/api/workflows/approval/resume", {"reason": "partner back"}).status_code == 200
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "waiting"
    assert api.get("/api/paused-workflows").json() == []
    assert_error(api.post("/api/workflows/approval/resume", {"reason": "again"}), 409, "not_applicable")


def test_commands_pause_and_resume_a_run_and_a_workflow(waiting_run):
    out = io.StringIO()
    call_command("workflows", "pause", waiting_run, "--reason", "cli", stdout=out)
    assert f"run {waiting_run} is paused." in out.getvalue()
    assert AuditEntry.objects.get(run_id=waiting_run, action="pause").actor.startswith("cli:")
    call_command("workflows", "resume", waiting_run, "--reason", "cli", stdout=out)
    assert Run.objects.get(id=waiting_run).status == "waiting"

    call_command("workflows", "pause", "--workflow", "approval", "--reason", "cli", stdout=out)
    assert WorkflowPause.objects.filter(workflow="approval").exists()
    listing = io.StringIO()
    call_command("workflows", "paused", stdout=listing)
    assert listing.getvalue().startswith("approval  since ")
    call_command("workflows", "resume", "--workflow", "approval", "--reason", "cli", stdout=out)
    assert not WorkflowPause.objects.exists()

    with pytest.raises(CommandError, match="either a RUN_ID or --workflow"):
        call_command("workflows", "pause", waiting_run, "--workflow", "approval", "--reason", "x")
    with pytest.raises(CommandError, match="not paused"):
        call_command("workflows", "resume", waiting_run, "--reason", "x")


def test_bulk_pause_then_resume_by_filter_audits_each_run_with_the_operation(api, registry):
    from tests.api.test_bulk import execute, waiting_runs
    from workflows.bulk import control

    run_ids = waiting_runs(api, registry, 3, prefix="b")
    preview = control.preview("pause", {"workflow": "approval"})
    assert preview.count == 3

    op = execute(
        control.start("pause", {"workflow": "approval"}, actor="ops", reason="hold", expected_count=3)
    )
    assert (op.status, op.done, op.skipped) == ("done", 3, 0)
    assert set(Run.objects.filter(id__in=run_ids).values_list("status", flat=True)) == {"paused"}
    audits = AuditEntry.objects.filter(run_id__in=run_ids, action="pause")
    assert {a.details.get("bulk_operation") for a in audits} == {op.id} and audits.count() == 3
    assert control.preview("pause", {"workflow": "approval"}).count == 0  # paused runs are not counted again

    op = execute(
        control.start("resume", {"workflow": "approval", "status": "paused"}, actor="ops", reason="go")
    )
    assert (op.done, op.skipped) == (3, 0)
    assert set(Run.objects.filter(id__in=run_ids).values_list("status", flat=True)) == {"waiting"}
