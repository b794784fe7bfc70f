"""`python manage.py workflows ...`: the operator's commands."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from tests.api import flows
from tests.api.helpers import counts
from workflows.http.auth import check_api_key
from workflows.models import ApiKey, AuditEntry, Entry, Message, Run
from workflows.testing import run_until_idle


def cmd(*args: str) -> str:
    out = io.StringIO()
    call_command("workflows", *args, stdout=out)
    return out.getvalue()


def start(registry, workflow="flaky", key="k") -> str:
    return registry.client(workflow).get_or_create([key]).run_id


def test_apikey__create_prints_the_key_once_and_revoke_refuses_it(db):
    out = cmd("apikey", "create", "deploy-bot")

    key = out.strip().splitlines()[-1]
    row = ApiKey.objects.get(name="deploy-bot")
    assert key.startswith(row.prefix) and key not in row.hashed_key
    assert check_api_key(key) == row

    out = cmd("apikey", "revoke", "deploy-bot")

    assert "revoked" in out
    assert check_api_key(key) is None


@pytest.mark.parametrize(
    "args", [("apikey", "create", "dup"), ("apikey", "revoke", "nobody")], ids=["duplicate", "unknown"]
)
def test_apikey__mistakes_are_command_errors(db, args):
    ApiKey.objects.all().delete()
    cmd("apikey", "create", "dup")
    before = counts()

    with pytest.raises(CommandError):
        cmd(*args)
    assert counts() == before


def test_list__filters_by_status(db, registry):
    done = start(registry, key="done")
    run_until_idle(registry)
    waiting = start(registry, "approval", key="waiting")

    everything = cmd("list")
    completed = cmd("list", "--status", "completed")

    assert done in everything and waiting in everything
    assert done in completed and waiting not in completed


def test_list__pages_with_a_cursor(db, registry):
    ids = [start(registry, key=f"k{i}") for i in range(3)]

    first = cmd("list", "--limit", "2")
    cursor = first.strip().splitlines()[-1].removeprefix("more: --cursor ")
    second = cmd("list", "--limit", "2", "--cursor", cursor)

    assert ids[2] in first and ids[1] in first and ids[0] not in first
    assert ids[0] in second and "more:" not in second


def test_show__prints_steps_and_attempts(db, registry):
    flows.FAILURES.update(fetch=1)
    run_id = start(registry)
    run_until_idle(registry)

    out = cmd("show", run_id)

    assert f"run {run_id}: flaky" in out and "status completed" in out
    assert "step fetch: completed" in out
    assert "attempt 1: error" in out and "RuntimeError: upstream said 503" in out and "(next in 1 min)" in out


def test_show__masks_secrets_as_the_inspector_does(db, registry):
    run_id = start(registry)
    run_until_idle(registry)
    Run.objects.filter(id=run_id).update(
        state={"api_key": "sk-live-123", "title": "kept"},
        error={"name": "RuntimeError", "message": "connect postgres://u:hunter2@db/x failed"},
    )

    out = cmd("show", run_id)

    assert "sk-live-123" not in out and "hunter2" not in out
    assert '"title": "kept"' in out and "postgres://u:" in out


@pytest.mark.parametrize(
    "run_id", ["3f1d8f7e-0000-4000-8000-000000000000", "nope"], ids=["unknown", "malformed"]
)
def test_show__unknown_run_is_a_command_error(db, run_id):
    with pytest.raises(CommandError, match="no run"):
        cmd("show", run_id)


def test_replay__audited_as_the_os_user(db, registry, monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "ops")
    flows.FAILURES.update(check=1)
    run_id = start(registry)
    run_until_idle(registry)
    check = Entry.objects.get(run_id=run_id, name="check")

    out = cmd("replay", run_id, "--entry", str(check.id), "--reason", "fixed", "--input", '{"n": 5}')

    assert "replays from entry" in out
    audit = AuditEntry.objects.get()
    assert (audit.action, audit.actor, audit.reason) == ("replay", "cli:ops", "fixed")
    run_until_idle(registry)
    run = Run.objects.get(id=run_id)
    assert run.status == "completed" and run.result["checked"] == "checked"
    assert Entry.objects.get(run_id=run_id, name="check", superseded=False).input == {"n": 5}


def test_replay__wait_for_new_leaves_the_consumed_message_with_the_history(db, registry):
    handle = registry.client("approval").get_or_create(["a"])
    message = handle.send("approve", {"approved": True, "by": "ann"})
    run_until_idle(registry)
    wait = Entry.objects.get(run_id=handle.run_id, name="wait-approval")

    cmd("replay", handle.run_id, "--entry", str(wait.id), "--reason", "ask again", "--wait-for-new")

    assert AuditEntry.objects.get().details["not_redelivered"] == [{"id": message.id, "queue": "approve"}]
    run_until_idle(registry)
    assert Run.objects.get(id=handle.run_id).status == "waiting"


def test_replay__bad_input_json_writes_nothing(db, registry):
    flows.FAILURES.update(check=1)
    run_id = start(registry)
    run_until_idle(registry)
    check = Entry.objects.get(run_id=run_id, name="check")
    before = counts()

    with pytest.raises(CommandError, match="not JSON"):
        cmd("replay", run_id, "--entry", str(check.id), "--reason", "r", "--input", "{nope")
    assert counts() == before


def test_retry_now__audited(db, registry, monkeypatch):
    monkeypatch.setattr("getpass.getuser", lambda: "ops")
    run_id = start(registry)
    run_until_idle(registry)
    fetch = Entry.objects.get(run_id=run_id, name="fetch")
    before = counts()

    with pytest.raises(CommandError, match="Retry now does not apply to a completed run"):
        cmd("retry-now", run_id, "--entry", str(fetch.id), "--reason", "r")
    assert counts() == before

    Run.objects.filter(id=run_id).update(status="waiting")
    Entry.objects.filter(id=fetch.id).update(status="retrying")
    cmd("retry-now", run_id, "--entry", str(fetch.id), "--reason", "upstream back")
    audit = AuditEntry.objects.get()
    assert (audit.action, audit.actor, audit.reason) == ("retry_now", "cli:ops", "upstream back")


def test_cancel__audited(db, registry):
    run_id = start(registry, "approval")
    run_until_idle(registry)

    out = cmd("cancel", run_id, "--reason", "withdrawn")

    assert "cancel requested" in out
    assert AuditEntry.objects.get().action == "cancel"
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).status == "cancelled"
    with pytest.raises(CommandError, match="already cancelled"):
        cmd("cancel", run_id, "--reason", "again")


def test_send__audited_and_answered(db, registry):
    run_id = start(registry, "approval")

    out = cmd(
        "send", run_id, "approve", "--body", json.dumps({"approved": True, "by": "ops"}), "--reason", "ok'd"
    )

    message = Message.objects.get()
    assert f"message {message.id} sent" in out
    audit = AuditEntry.objects.get()
    assert (audit.action, audit.reason, audit.details["queue"]) == ("send", "ok'd", "approve")
    run_until_idle(registry)
    assert Run.objects.get(id=run_id).result == {"approved": True, "by": "ops"}


@pytest.mark.parametrize(
    ("queue", "body", "match"),
    [
        ("approve", "{bad", "not JSON"),
        ("approve", '{"approved": 1.5}', "invalid payload"),
        ("nope", "1", "no queue"),
    ],
    ids=["not-json", "schema", "unknown-queue"],
)
def test_send__bad_input_writes_nothing(db, registry, queue, body, match):
    run_id = start(registry, "approval")
    before = counts()

    with pytest.raises(CommandError, match=match):
        cmd("send", run_id, queue, "--body", body, "--reason", "r")
    assert counts() == before
