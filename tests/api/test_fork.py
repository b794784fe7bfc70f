"""`POST /api/runs/{id}/fork`: 201 with the new run; a missing run or entry is 404; a key another
run holds is 409 `key_taken`; a fork that does not apply is 409 `not_applicable` with the reason;
a refused fork leaves every table as it was. And `manage.py workflows fork`."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command

from tests.api import flows
from tests.api.helpers import assert_error, counts
from workflows.models import AuditEntry, Entry, Run
from workflows.testing import run_until_idle


@pytest.fixture
def failed_run(api, registry) -> Run:
    flows.FAILURES.update(check=1)
    response = api.post("/api/workflows/flaky/runs", {"key": ["k"]})
    assert response.status_code == 201
    run_until_idle(registry)
    run = Run.objects.get(id=response.json()["id"])
    assert run.status == "failed"
    return run


def test_fork__answers_201_with_the_new_run_which_runs_the_step_again(api, registry, failed_run):
    check = Entry.objects.get(run=failed_run, name="check")

    response = api.post(f"/api/runs/{failed_run.id}/fork", {"entry_id": check.id, "reason": "data fixed"})

    assert response.status_code == 201, response.content
    body = response.json()
    assert (body["key"], body["status"], body["workflow"]) == (["k~fork-1"], "pending", "flaky")
    assert (body["forked_from"], body["forked_from_entry"]) == (str(failed_run.id), check.id)
    audit = AuditEntry.objects.get(run_id=body["id"])
    assert (audit.action, audit.actor, audit.reason) == ("fork", "api:tester", "data fixed")
    run_until_idle(registry)
    assert Run.objects.get(id=body["id"]).status == "completed", Run.objects.get(id=body["id"]).error
    assert Run.objects.get(id=failed_run.id).status == "failed"  # the original stays as it was
    assert api.get(f"/api/runs/{body['id']}").json()["forked_from"] == str(failed_run.id)


def test_fork__with_a_key_and_an_edited_input(api, registry, failed_run):
    check = Entry.objects.get(run=failed_run, name="check")
    response = api.post(
        f"/api/runs/{failed_run.id}/fork", {"entry_id": check.id, "key": ["mine", "1"], "input": {"n": 2}}
    )
    assert response.status_code == 201, response.content
    assert response.json()["key"] == ["mine", "1"]
    assert Entry.objects.get(run_id=response.json()["id"], name="check").input == {"n": 2}


def test_fork__of_a_missing_run_or_entry_is_404(api, failed_run):
    check = Entry.objects.get(run=failed_run, name="check")
    before = counts()
    assert_error(api.post(f"/api/runs/{failed_run.id}/fork", {"entry_id": 999999}), 404, "not_found")
    missing = "0190d9c4-0000-7000-8000-000000000000"
    assert_error(api.post(f"/api/runs/{missing}/fork", {"entry_id": check.id}), 404, "not_found")
    assert counts() == before


def test_fork__to_a_key_another_run_holds_is_409_key_taken(api, failed_run):
    check = Entry.objects.get(run=failed_run, name="check")
    before = counts()
    error = assert_error(
        api.post(f"/api/runs/{failed_run.id}/fork", {"entry_id": check.id, "key": ["k"]}), 409, "key_taken"
    )
    assert error["detail"] == {"workflow": "flaky", "key": ["k"], "runId": str(failed_run.id)}
    assert counts() == before


def test_fork__that_does_not_apply_is_409_with_the_reason(api, failed_run):
    check = Entry.objects.get(run=failed_run, name="check")
    api.post(f"/api/runs/{failed_run.id}/replay", {"entry_id": check.id, "reason": "again"})
    before = counts()
    error = assert_error(
        api.post(f"/api/runs/{failed_run.id}/fork", {"entry_id": check.id}), 409, "not_applicable"
    )
    assert "superseded" in error["message"]
    assert error["detail"]["action"] == "fork"
    assert counts() == before


def test_fork__an_input_for_an_entry_that_is_not_a_step_is_422(api, registry):
    response = api.post("/api/workflows/approval/runs", {"key": ["a"]})
    run_id = response.json()["id"]
    run_until_idle(registry)
    wait = Entry.objects.get(run_id=run_id, name="wait-approval")
    error = assert_error(
        api.post(f"/api/runs/{run_id}/fork", {"entry_id": wait.id, "input": 1}), 422, "invalid_request"
    )
    assert "only a step's input" in error["message"]


def test_fork_command__prints_the_new_run_id(failed_run):
    check = Entry.objects.get(run=failed_run, name="check")
    out = io.StringIO()
    call_command(
        "workflows", "fork", str(failed_run.id), "--entry", str(check.id), "--reason", "cli", stdout=out
    )
    new_id = out.getvalue().splitlines()[0]
    fork = Run.objects.get(id=new_id)
    assert fork.forked_from_id == failed_run.id and fork.key == ["k~fork-1"]
    assert AuditEntry.objects.get(run=fork).actor.startswith("cli:")

    call_command(
        "workflows", "fork", str(failed_run.id), "--entry", str(check.id), "--reason", "cli", "--key", "other",
        stdout=io.StringIO(),
    )  # fmt: skip
    assert Run.objects.filter(key=["other"]).exists()
    with pytest.raises(CommandError, match="already has the key"):
        call_command(
            "workflows",
            "fork",
            str(failed_run.id),
            "--entry",
            str(check.id),
            "--reason",
            "x",
            "--key",
            '["k"]',
        )
